package wire

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/mapyard/mapyard/mapserver/sim"
)

// Movement command names: a command envelope with feature "movement" and action
// "input_batch" carries an InputBatch payload.
const (
	FeatureMovement   = "movement"
	ActionInputBatch  = "input_batch"
	MaxInputsPerBatch = 32
)

// InputBatch is the payload of a movement input_batch command:
//
//	{"inputs":[{"seq":101,"dx":1,"dy":0},{"seq":102,"dx":1,"dy":1}]}
//
// One entry is one tick of walking in direction (dx, dy), each component an integer in
// [-127, 127] (the length does not matter: the speed is fixed; (0, 0) stands still).
// Every entry has exactly these three members. The struct documents the shape and lets
// tests compare with encoding/json; DecodeInputBatch does not use it.
// Seqs are positive and strictly increasing, counted by the client across batches, so
// a resent batch is recognised and its old entries ignored.
type InputBatch struct {
	Inputs []InputEntry `json:"inputs"`
}

// InputEntry is one input of an InputBatch.
type InputEntry struct {
	Seq uint64 `json:"seq"`
	DX  int    `json:"dx"`
	DY  int    `json:"dy"`
}

// DecodeInputBatch strictly decodes an input_batch payload and appends its inputs to
// dst. Anything but the documented shape is refused with an *Error whose Code says
// why (see the codes), and dst is then returned unchanged: unknown, missing or
// repeated fields, strings with escapes, fractions or exponents, trailing data, no
// inputs, more than MaxInputsPerBatch, seqs that are zero or not strictly increasing,
// directions outside [-127, 127].
//
// It is a hand-written scanner of that one shape rather than encoding/json: every
// player sends a batch per tick, and the scanner is an order of magnitude cheaper and
// allocates nothing.
func DecodeInputBatch(payload []byte, dst []sim.Input) ([]sim.Input, error) {
	orig, n0 := dst, len(dst)
	p := inputParser{b: payload}
	p.ws()
	p.expect('{')
	p.key("inputs")
	p.expect('[')
	if p.peek() == ']' {
		return dst, errorf(CodeBadPayload, "input batch: no inputs")
	}
	var prev uint64
	for p.err == nil {
		if len(dst)-n0 == MaxInputsPerBatch {
			return orig, errorf(CodeTooManyInputs, "input batch: more than %d inputs", MaxInputsPerBatch)
		}
		in, err := p.entry(len(dst)-n0, prev)
		if err != nil {
			return orig, err
		}
		if p.err != nil {
			break
		}
		dst = append(dst, in)
		prev = in.Seq
		if p.peek() != ',' {
			break
		}
		p.i++
	}
	p.expect(']')
	p.expect('}')
	p.ws()
	if p.err == nil && p.i != len(p.b) {
		p.err = errors.New("trailing data")
	}
	if p.err != nil {
		return orig, errorf(CodeBadPayload, "input batch: %v at byte %d", p.err, p.i)
	}
	return dst, nil
}

// inputParser scans an input batch; err holds the first syntax error.
type inputParser struct {
	b   []byte
	i   int
	err error
}

// ws skips JSON whitespace.
func (p *inputParser) ws() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

// peek returns the next byte after whitespace, 0 at the end or after an error.
func (p *inputParser) peek() byte {
	p.ws()
	if p.err != nil || p.i == len(p.b) {
		return 0
	}
	return p.b[p.i]
}

// expect consumes c after whitespace.
func (p *inputParser) expect(c byte) {
	if p.peek() != c {
		if p.err == nil {
			p.err = fmt.Errorf("want %q", c)
		}
		return
	}
	p.i++
}

// name reads a member name without escapes and its colon.
func (p *inputParser) name() []byte {
	p.expect('"')
	start := p.i
	for p.err == nil && p.i < len(p.b) && p.b[p.i] != '"' {
		if p.b[p.i] == '\\' || p.b[p.i] < 0x20 {
			p.err = errors.New("escape or control character in a name")
		}
		p.i++
	}
	name := p.b[start:min(p.i, len(p.b))]
	p.expect('"')
	p.expect(':')
	return name
}

// key reads the member name want and its colon.
func (p *inputParser) key(want string) {
	if got := p.name(); p.err == nil && string(got) != want {
		p.err = fmt.Errorf("unknown field %q", got)
	}
}

// integer reads a JSON integer (no fraction, no exponent); ok is false when it does
// not fit in 64 bits.
func (p *inputParser) integer() (neg bool, v uint64, ok bool) {
	p.ws()
	if p.err != nil {
		return false, 0, false
	}
	if p.i < len(p.b) && p.b[p.i] == '-' {
		neg = true
		p.i++
	}
	start := p.i
	ok = true
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		d := uint64(p.b[p.i] - '0')
		if v > (1<<64-1-d)/10 {
			ok = false
		}
		v = v*10 + d
		p.i++
	}
	switch {
	case p.i == start:
		p.err = errors.New("want an integer")
	case p.b[start] == '0' && p.i-start > 1:
		p.err = errors.New("leading zero")
	case p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E'):
		p.err = errors.New("not an integer")
	}
	return neg, v, ok
}

// entry reads one {"seq":..,"dx":..,"dy":..} object (members in any order, each once)
// and checks it against the previous seq. Syntax errors are left in p.err; the
// returned error is a semantic refusal.
func (p *inputParser) entry(i int, prev uint64) (sim.Input, error) {
	var in sim.Input
	var seen [3]bool
	p.expect('{')
	for m := 0; m < 3 && p.err == nil; m++ {
		if m > 0 {
			p.expect(',')
		}
		field := p.name()
		neg, v, ok := p.integer()
		if p.err != nil {
			break
		}
		switch string(field) {
		case "seq":
			if seen[0] {
				p.err = errors.New("repeated field seq")
				break
			}
			seen[0] = true
			if neg || !ok || v == 0 || v <= prev {
				return in, errorf(CodeBadSeq, "input %d: seq must be a positive integer above %d", i, prev)
			}
			in.Seq = v
		case "dx", "dy":
			j := 1
			if string(field) == "dy" {
				j = 2
			}
			if seen[j] {
				p.err = fmt.Errorf("repeated field %s", field)
				break
			}
			seen[j] = true
			if !ok || v > sim.MaxDir {
				return in, errorf(CodeBadDirection, "input %d: %s outside [-%d, %d]", i, field, sim.MaxDir, sim.MaxDir)
			}
			d := int8(v)
			if neg {
				d = -d
			}
			if j == 1 {
				in.DX = d
			} else {
				in.DY = d
			}
		default:
			p.err = fmt.Errorf("unknown field %q", field)
		}
	}
	p.expect('}')
	return in, nil
}

// EncodeInputBatch appends the JSON payload of inputs to dst, for clients and bots.
func EncodeInputBatch(dst []byte, inputs []sim.Input) []byte {
	dst = append(dst, `{"inputs":[`...)
	for i, in := range inputs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"seq":`...)
		dst = strconv.AppendUint(dst, in.Seq, 10)
		dst = append(dst, `,"dx":`...)
		dst = strconv.AppendInt(dst, int64(in.DX), 10)
		dst = append(dst, `,"dy":`...)
		dst = strconv.AppendInt(dst, int64(in.DY), 10)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}
