package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
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
// dst. Unknown fields, trailing data, a missing or empty inputs list, more than
// MaxInputsPerBatch entries, non-increasing or zero seqs and out-of-range directions
// are refused with an *Error whose Code says which; dst is then returned unchanged.
func DecodeInputBatch(payload []byte, dst []sim.Input) ([]sim.Input, error) {
	var b struct {
		Inputs *[]InputEntry `json:"inputs"`
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return dst, errorf(CodeBadPayload, "input batch: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return dst, errorf(CodeBadPayload, "input batch: trailing data")
	}
	if b.Inputs == nil || len(*b.Inputs) == 0 {
		return dst, errorf(CodeBadPayload, "input batch: no inputs")
	}
	in := *b.Inputs
	if len(in) > MaxInputsPerBatch {
		return dst, errorf(CodeTooManyInputs, "input batch: %d inputs, at most %d", len(in), MaxInputsPerBatch)
	}
	var prev uint64
	for i, e := range in {
		if e.Seq == 0 || e.Seq <= prev {
			return dst, errorf(CodeBadSeq, "input %d: seq %d not above %d", i, e.Seq, prev)
		}
		if e.DX < -sim.MaxDir || e.DX > sim.MaxDir || e.DY < -sim.MaxDir || e.DY > sim.MaxDir {
			return dst, errorf(CodeBadDirection, "input %d: direction (%d, %d) outside [-%d, %d]", i, e.DX, e.DY, sim.MaxDir, sim.MaxDir)
		}
		prev = e.Seq
	}
	for _, e := range in {
		dst = append(dst, sim.Input{Seq: e.Seq, DX: int8(e.DX), DY: int8(e.DY)})
	}
	return dst, nil
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
