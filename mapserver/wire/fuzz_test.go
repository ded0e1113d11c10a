package wire_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// FuzzDecodeSnapshot feeds arbitrary frames to a decoder that holds a format-2
// baseline: malformed input (another format, unknown field bits, truncated fields, ...)
// must return an error, never panic, and a failed decode must leave the decoder able to
// decode the next good frame.
func FuzzDecodeSnapshot(f *testing.F) {
	enc, cl := wire.NewEncoder(4), wire.NewClient(4)
	enc.Begin(2)
	for i := range int32(5) {
		enc.Set(i*3, wire.EntityState{ID: uint64(i + 1), Kind: 1, X: 100 * i, Y: 50, Facing: uint8(i * 40)})
	}
	first, _ := enc.Encode(nil, cl, 7, 3, []int32{0, 3, 6, 9})
	cl.Ack(2)
	enc.Begin(4)
	for i := range int32(5) {
		enc.Set(i*3, wire.EntityState{ID: uint64(i + 1), Kind: 1, X: 100*i + 3, Y: 49, Facing: uint8(i * 41), State: uint8(i % 3)})
	}
	enc.Set(20, wire.EntityState{ID: 99, Kind: 3, X: 7, Y: 8, State: 1, Template: 300})
	delta, _ := enc.Encode(nil, cl, 8, 3, []int32{3, 6, 9, 12, 20})
	f.Add(first)
	f.Add(delta)
	f.Add([]byte{})
	f.Add([]byte{0x05, 0x04, 0x02, 0, 0, 1, 0, 0, 0})
	f.Add([]byte{0x04, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	// A format-1 frame, a spawn with an unknown field bit, an update with a state mask.
	f.Add([]byte{0x02, 0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00})
	f.Add([]byte{0x04, 0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x03, 0x01, 0x00, 0x00, 0x08, 0x05, 0x00})
	f.Add([]byte{0x05, 0x04, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x1c, 0x01, 0x03, 0x07, 0x80})
	f.Fuzz(func(t *testing.T, frame []byte) {
		dec := wire.NewDecoder(4)
		if _, err := dec.Decode(first); err != nil {
			t.Fatal(err)
		}
		snap, err := dec.Decode(frame)
		if err == nil {
			for i := 1; i < len(snap.Entities); i++ {
				if snap.Entities[i-1].Slot >= snap.Entities[i].Slot {
					t.Fatalf("entities not sorted by slot: %v", snap.Entities)
				}
			}
			return
		}
		if again, err := dec.Decode(delta); err != nil && !errors.Is(err, wire.ErrNoBaseline) {
			t.Fatalf("good delta after a refused frame: %v", err)
		} else if err == nil && len(again.Entities) != 5 {
			t.Fatalf("good delta after a refused frame decoded %d entities", len(again.Entities))
		}
	})
}

// FuzzDecodeInputBatch: every payload is either refused with a coded *wire.Error or
// decodes to inputs that satisfy the documented rules and survive a round trip.
func FuzzDecodeInputBatch(f *testing.F) {
	f.Add([]byte(`{"inputs":[{"seq":1,"dx":1,"dy":0},{"seq":2,"dx":-127,"dy":127}]}`))
	f.Add([]byte(`{"inputs":[]}`))
	f.Add([]byte(`{"inputs":[{"seq":2,"dx":0,"dy":0},{"seq":2,"dx":0,"dy":0}]}`))
	f.Add([]byte(`{"inputs":[{"seq":1,"dx":128,"dy":0}]}`))
	f.Add([]byte(`{"inputs":[{"seq":1,"dx":1.5,"dy":0}]}`))
	f.Add([]byte(`{"inputs":[{"seq":1,"dx":1,"dy":0,"up":true}]}`))
	f.Add([]byte(`{"inputs":[{"seq":1}]} {}`))
	f.Add([]byte(`null`))
	f.Add([]byte(` {"inputs" :[ {"dy":-1, "seq":5,"dx":1}]}`))
	f.Add([]byte(`{"inputs":[{"seq":5,"dx":-0,"dy":1,"dy":2}]}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		got, err := wire.DecodeInputBatch(payload, nil)
		if err != nil {
			var we *wire.Error
			if !errors.As(err, &we) || we.Code == "" || got != nil {
				t.Fatalf("refusal %v (%T) without a code or with inputs %v", err, err, got)
			}
			return
		}
		if len(got) == 0 || len(got) > wire.MaxInputsPerBatch {
			t.Fatalf("accepted %d inputs", len(got))
		}
		for i, in := range got {
			if in.Seq == 0 || i > 0 && in.Seq <= got[i-1].Seq || in.DX < -sim.MaxDir || in.DY < -sim.MaxDir {
				t.Fatalf("accepted invalid input %d: %+v", i, in)
			}
		}
		// Whatever the scanner accepts, encoding/json reads the same way.
		var ref wire.InputBatch
		if err := json.Unmarshal(payload, &ref); err != nil || len(ref.Inputs) != len(got) {
			t.Fatalf("accepted %q, which encoding/json reads as %+v, %v", payload, ref, err)
		}
		for i, e := range ref.Inputs {
			if e.Seq != got[i].Seq || e.DX != int(got[i].DX) || e.DY != int(got[i].DY) {
				t.Fatalf("input %d decoded as %+v, encoding/json reads %+v", i, got[i], e)
			}
		}
		again, err := wire.DecodeInputBatch(wire.EncodeInputBatch(nil, got), nil)
		if err != nil || len(again) != len(got) {
			t.Fatalf("round trip: %v, %v", again, err)
		}
		for i := range got {
			if again[i] != got[i] {
				t.Fatalf("round trip changed input %d: %+v to %+v", i, got[i], again[i])
			}
		}
	})
}
