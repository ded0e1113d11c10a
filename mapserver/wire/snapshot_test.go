package wire_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mapyard/mapyard/mapserver/wire"
)

// world is a random test world of slots, as the tick loop would feed the encoder.
type world struct {
	r       *rand.Rand
	ents    []wire.EntityState // by slot; ID 0 = free
	visible []bool
	nextID  uint64
	// calm worlds change which slots are visible only every few ticks, so that
	// consecutive snapshots of a client often show the same slots (and share them).
	calm bool
}

// newWorld returns a world of slots; odd seeds make calm ones, so that every test
// looping over seeds covers both.
func newWorld(seed uint64, slots int) *world {
	w := &world{r: rand.New(rand.NewPCG(seed, 1)), ents: make([]wire.EntityState, slots), visible: make([]bool, slots), nextID: 1, calm: seed%2 == 1}
	for i := range w.ents {
		if w.r.IntN(3) > 0 {
			w.spawn(i)
		}
	}
	return w
}

func (w *world) spawn(i int) {
	w.ents[i] = wire.EntityState{ID: w.nextID, Kind: uint8(1 + w.r.IntN(3)), X: w.r.Int32N(32000), Y: w.r.Int32N(32000)}
	w.nextID++
	w.visible[i] = w.r.IntN(2) == 0
	// Any mix of zero (omitted) and set state fields.
	if w.r.IntN(2) == 0 {
		w.ents[i].Facing = uint8(w.r.UintN(256))
	}
	if w.r.IntN(2) == 0 {
		w.ents[i].State = uint8(w.r.UintN(4))
	}
	if w.r.IntN(2) == 0 {
		w.ents[i].Template = w.template()
	}
}

// template returns a random template id, often small, sometimes as large as they go.
func (w *world) template() uint32 {
	switch w.r.IntN(4) {
	case 0:
		return 0
	case 1:
		return w.r.Uint32()
	default:
		return w.r.Uint32N(300)
	}
}

// changeState changes one or more state fields of e at random (to zero, too), alone or
// with a move.
func (w *world) changeState(e *wire.EntityState) {
	for k := 1 + w.r.IntN(7); k != 0; k >>= 1 {
		switch w.r.IntN(3) {
		case 0:
			e.Facing = uint8(w.r.UintN(256))
		case 1:
			e.State = uint8(w.r.UintN(256))
		default:
			e.Template = w.template()
		}
	}
	if w.r.IntN(3) == 0 {
		e.Y += w.r.Int32N(13) - 6
	}
}

// advance moves, spawns, despawns, changes state and visibility at random.
func (w *world) advance() {
	churn := !w.calm || w.r.IntN(6) == 0
	for i := range w.ents {
		e := &w.ents[i]
		k := w.r.IntN(100)
		if !churn && k < 14 {
			k += 16 // a move or a change of state instead
		}
		switch {
		case e.ID == 0:
			if k < 10 {
				w.spawn(i)
			}
		case k < 5:
			*e = wire.EntityState{}
		case k < 8:
			w.spawn(i) // slot reused by another entity at once
		case k < 12:
			w.visible[i] = !w.visible[i]
		case k < 14:
			e.X += w.r.Int32N(20000) - 10000 // a long jump
		case k < 30:
			w.changeState(e)
		case k < 70:
			e.X += w.r.Int32N(13) - 6
			e.Y += w.r.Int32N(13) - 6
		}
	}
}

func (w *world) encode(enc *wire.Encoder, tick uint32) []int32 {
	enc.Begin(tick)
	var vis []int32
	for i, e := range w.ents {
		enc.Set(int32(i), e)
		if e.ID != 0 && w.visible[i] {
			vis = append(vis, int32(i))
		}
	}
	w.r.Shuffle(len(vis), func(a, b int) { vis[a], vis[b] = vis[b], vis[a] })
	if len(vis) > 0 {
		vis = append(vis, vis[0]) // a duplicate is harmless
	}
	return vis
}

// ackSome acknowledges some of the pending ticks to cl and returns the rest: acks
// arrive late, out of order or not at all.
func (w *world) ackSome(cl *wire.Client, pending []uint32) []uint32 {
	for len(pending) > 0 && w.r.IntN(3) == 0 {
		k := w.r.IntN(len(pending))
		if w.r.IntN(4) > 0 {
			cl.Ack(pending[k])
		}
		pending = slices.Delete(pending, k, k+1)
	}
	return pending
}

func (w *world) expect() []wire.Entity {
	var out []wire.Entity
	for i, e := range w.ents {
		if e.ID != 0 && w.visible[i] {
			out = append(out, wire.Entity{Slot: int32(i), EntityState: e})
		}
	}
	return out
}

// TestDeltaChainEqualsFull: a full snapshot followed by every delta the client
// receives decodes to exactly what a full snapshot of the same tick shows, under
// random movement, changes of every state field (facing, state, template, to and from
// zero), spawns, despawns, slot reuse, lost frames and lost or late acks
// (deltas against older acknowledged baselines, and full frames once the ack fell
// out of the ring), in worlds whose visible slots change on most snapshots and in calm
// ones where runs of snapshots show the same slots.
func TestDeltaChainEqualsFull(t *testing.T) {
	for seed := range uint64(20) {
		w := newWorld(seed, 80)
		enc := wire.NewEncoder(8)
		cl := wire.NewClient(8)
		dec := wire.NewDecoder(8)
		var pendingAcks []uint32
		deltas, fulls := 0, 0
		var buf []byte
		for tick := uint32(2); tick < 600; tick += 2 {
			w.advance()
			vis := w.encode(enc, tick)
			var full bool
			buf, full = enc.Encode(buf[:0], cl, uint64(tick/2), 3, vis)
			if full {
				fulls++
			} else {
				deltas++
			}
			// A fresh client decodes a full frame of the same tick: the reference.
			ref, _ := enc.Encode(nil, wire.NewClient(8), uint64(tick/2), 3, vis)
			refSnap, err := wire.NewDecoder(1).Decode(ref)
			if err != nil {
				t.Fatalf("seed %d tick %d: decode full: %v", seed, tick, err)
			}
			if !slices.Equal(refSnap.Entities, w.expect()) {
				t.Fatalf("seed %d tick %d: full snapshot differs from the world", seed, tick)
			}
			if w.r.IntN(10) < 2 { // frame lost
				continue
			}
			snap, err := dec.Decode(buf)
			if err != nil {
				t.Fatalf("seed %d tick %d: decode (full=%v): %v", seed, tick, full, err)
			}
			if snap.Tick != tick || snap.Seq != uint64(tick/2) || snap.Self != 3 || snap.Full != full {
				t.Fatalf("seed %d tick %d: header %+v", seed, tick, snap)
			}
			if !slices.Equal(snap.Entities, refSnap.Entities) {
				t.Fatalf("seed %d tick %d: delta chain %v\nfull %v", seed, tick, snap.Entities, refSnap.Entities)
			}
			pendingAcks = w.ackSome(cl, append(pendingAcks, tick))
		}
		if deltas == 0 || fulls < 2 {
			t.Fatalf("seed %d: %d deltas, %d fulls: the test did not exercise both", seed, deltas, fulls)
		}
	}
}

func TestAckRules(t *testing.T) {
	enc, cl := wire.NewEncoder(4), wire.NewClient(4)
	if cl.Ack(2) {
		t.Fatal("ack of a tick never sent accepted")
	}
	enc.Begin(2)
	enc.Set(0, wire.EntityState{ID: 1, X: 5})
	buf, full := enc.Encode(nil, cl, 0, -1, []int32{0})
	if !full {
		t.Fatal("first snapshot not full")
	}
	if !cl.Ack(2) || cl.Ack(2) {
		t.Fatal("ack of a sent tick refused, or accepted twice")
	}
	enc.Begin(4)
	enc.Set(0, wire.EntityState{ID: 1, X: 5})
	buf, full = enc.Encode(buf[:0], cl, 0, -1, []int32{0})
	if full {
		t.Fatal("snapshot after an ack is full")
	}
	// At rest, a delta is framing only: header, tick, base, seq, self, three counts.
	if len(buf) != 8 {
		t.Fatalf("delta of an entity at rest is %d bytes: % x", len(buf), buf)
	}
	cl.Reset()
	if _, full = enc.Encode(buf[:0], cl, 0, -1, []int32{0}); !full {
		t.Fatal("snapshot after Reset is not full")
	}
}

func TestDecodeNoBaseline(t *testing.T) {
	enc, cl := wire.NewEncoder(4), wire.NewClient(4)
	enc.Begin(2)
	enc.Encode(nil, cl, 0, -1, nil)
	cl.Ack(2)
	enc.Begin(4)
	buf, _ := enc.Encode(nil, cl, 0, -1, nil)
	if _, err := wire.NewDecoder(4).Decode(buf); !errors.Is(err, wire.ErrNoBaseline) {
		t.Fatalf("delta without its baseline: %v, want ErrNoBaseline", err)
	}
}

// TestEncodeSteadyStateAllocatesNothing: once a client's ring and buffers are warm,
// encoding and decoding snapshots of moving entities allocates nothing.
func TestEncodeSteadyStateAllocatesNothing(t *testing.T) {
	enc, cl, dec := wire.NewEncoder(4), wire.NewClient(4), wire.NewDecoder(4)
	vis := []int32{9, 3, 5, 1, 7}
	buf := make([]byte, 0, 256)
	tick := uint32(0)
	step := func() {
		tick += 2
		enc.Begin(tick)
		for _, s := range vis {
			enc.Set(s, wire.EntityState{ID: uint64(s) + 1, Kind: 2, X: int32(tick) * 3, Y: int32(s)})
		}
		buf, _ = enc.Encode(buf[:0], cl, uint64(tick), 1, vis)
		if _, err := dec.Decode(buf); err != nil {
			t.Fatal(err)
		}
		cl.Ack(tick)
	}
	for range 10 {
		step()
	}
	if a := testing.AllocsPerRun(50, step); a != 0 {
		t.Fatalf("a snapshot allocates %v times in steady state", a)
	}
}

// TestRecordsCountWhatChanged: a decoded snapshot counts its frame's records, so a
// client can tell a snapshot that changed nothing since its baseline (0).
func TestRecordsCountWhatChanged(t *testing.T) {
	enc, cl, dec := wire.NewEncoder(4), wire.NewClient(4), wire.NewDecoder(4)
	for i, step := range []struct {
		x, records int
		gone       bool
	}{{x: 5, records: 1}, {x: 5, records: 0}, {x: 9, records: 1}, {x: 9, records: 0}, {gone: true, records: 1}} {
		tick := uint32(2 + 2*i)
		enc.Begin(tick)
		if !step.gone {
			enc.Set(0, wire.EntityState{ID: 1, Kind: 1, X: int32(step.x)})
		}
		buf, _ := enc.Encode(nil, cl, 0, -1, []int32{0})
		s, err := dec.Decode(buf)
		if err != nil {
			t.Fatal(err)
		}
		if s.Records != step.records {
			t.Fatalf("snapshot %d: %d records, want %d", i, s.Records, step.records)
		}
		cl.Ack(tick)
	}
}
