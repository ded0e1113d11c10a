package wire

import (
	"encoding/json"
	"unicode/utf8"
)

// DecodeInbound decodes one client envelope into *in, exactly as json.Unmarshal into a
// zero Inbound would: it accepts the same messages, fills the same fields and fails
// with encoding/json's error. The common shape of a command, ack or ping
// ({"v":1,"kind":"command","seq":7,"feature":"movement","action":"input_batch",
// "payload":{...}}, {"v":1,"kind":"ping","t":123}) is read by a reflection-free scanner; anything it does not
// recognise (other members, escapes, non-ASCII strings, repeated members, a payload
// that is not an object or array, ...) goes to encoding/json. Every player sends a
// command per tick, and encoding/json's reflection was a tenth of the map's reading
// cost at W1. Payload may alias data.
func DecodeInbound(data []byte, in *Inbound) error {
	*in = Inbound{}
	if fastInbound(data, in) {
		return nil
	}
	*in = Inbound{}
	return json.Unmarshal(data, in)
}

// fastInbound scans the common envelope shape into *in and reports whether it could;
// false leaves *in partly filled and says nothing about validity.
func fastInbound(b []byte, in *Inbound) bool {
	p := inputParser{b: b}
	p.expect('{')
	if p.peek() == '}' {
		p.i++
		return p.end()
	}
	var seen [8]bool
	for p.err == nil {
		name := p.name()
		if p.err != nil {
			return false
		}
		f := inboundField(name)
		if f < 0 || seen[f] {
			return false
		}
		seen[f] = true
		p.ws()
		switch f {
		case 0:
			v, ok := p.plainUint(18)
			if !ok {
				return false
			}
			in.V = int(v)
		case 1, 2, 3:
			s, ok := p.plainString()
			if !ok {
				return false
			}
			switch f {
			case 1:
				in.Kind = s
			case 2:
				in.Feature = s
			default:
				in.Action = s
			}
		case 4, 5:
			v, ok := p.plainUint(20)
			if !ok {
				return false
			}
			if f == 4 {
				in.Seq = v
			} else {
				in.Tick = v
			}
		case 6:
			raw, ok := p.rawComposite()
			if !ok {
				return false
			}
			in.Payload = raw
		case 7:
			n, ok := p.number()
			if !ok {
				return false
			}
			in.T = json.Number(n)
		}
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return p.end()
		default:
			return false
		}
	}
	return false
}

// inboundField numbers the members the fast path reads, -1 for any other name.
func inboundField(name []byte) int {
	switch string(name) {
	case "v":
		return 0
	case "kind":
		return 1
	case "feature":
		return 2
	case "action":
		return 3
	case "seq":
		return 4
	case "tick":
		return 5
	case "payload":
		return 6
	case "t":
		return 7
	}
	return -1
}

// end reports whether only whitespace follows.
func (p *inputParser) end() bool {
	p.ws()
	return p.err == nil && p.i == len(p.b)
}

// plainUint reads a non-negative JSON integer of at most maxDigits digits that fits in
// 64 bits and is followed by a delimiter.
func (p *inputParser) plainUint(maxDigits int) (uint64, bool) {
	if p.i >= len(p.b) || p.b[p.i] == '-' {
		return 0, false
	}
	start := p.i
	neg, v, ok := p.integer()
	if neg || !ok || p.err != nil || p.i-start > maxDigits || !p.delimited() {
		return 0, false
	}
	return v, true
}

// delimited reports whether the value just read ends at whitespace, ',' or '}' (or the
// end, which the caller then refuses), so that "1x" or "1true" are not half-read.
func (p *inputParser) delimited() bool {
	if p.i == len(p.b) {
		return true
	}
	switch p.b[p.i] {
	case ' ', '\t', '\n', '\r', ',', '}':
		return true
	}
	return false
}

// number reads a JSON number literal (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?)
// followed by a delimiter.
func (p *inputParser) number() (string, bool) {
	b, start, j := p.b, p.i, p.i
	digits := func() bool {
		k := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j > k
	}
	if j < len(b) && b[j] == '-' {
		j++
	}
	if j < len(b) && b[j] == '0' {
		j++
	} else if !digits() {
		return "", false
	}
	if j < len(b) && b[j] == '.' {
		j++
		if !digits() {
			return "", false
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if !digits() {
			return "", false
		}
	}
	p.i = j
	if !p.delimited() {
		return "", false
	}
	return string(b[start:j]), true
}

// plainString reads a JSON string of printable ASCII without escapes.
func (p *inputParser) plainString() (string, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", false
	}
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		c := p.b[j]
		switch {
		case c == '"':
			p.i = j + 1
			return intern(p.b[start:j]), true
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return "", false
		}
	}
	return "", false
}

// rawComposite returns the bytes of the object or array that starts here once
// json.Valid accepts them; strings inside may be anything valid, since the bytes are
// kept as they are.
func (p *inputParser) rawComposite() (json.RawMessage, bool) {
	if p.i >= len(p.b) || (p.b[p.i] != '{' && p.b[p.i] != '[') {
		return nil, false
	}
	start, depth, inString := p.i, 0, false
	for j := start; j < len(p.b); j++ {
		c := p.b[j]
		if inString {
			switch c {
			case '\\':
				j++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				raw := p.b[start : j+1]
				if !json.Valid(raw) {
					return nil, false
				}
				p.i = j + 1
				return raw, true
			}
		}
	}
	return nil, false
}

// intern returns the protocol's own constant for the names every command repeats, so
// that reading them allocates nothing.
func intern(b []byte) string {
	switch string(b) {
	case KindCommand:
		return KindCommand
	case KindAck:
		return KindAck
	case KindPing:
		return KindPing
	case FeatureMovement:
		return FeatureMovement
	case ActionInputBatch:
		return ActionInputBatch
	}
	return string(b)
}
