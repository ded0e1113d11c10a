package wire_test

import (
	"slices"
	"testing"

	"github.com/mapyard/mapyard/mapserver/wire"
)

// TestFarSlotsLagButNeverStepBack: a client that sees some slots from afar decodes,
// through every delta, lost frame and late ack of the delta-chain test, every visible
// entity with its current id, kind, state and template; the slots it sees near with
// their current position and facing; the far ones with the position and facing of one
// of the last farEvery snapshots, never older than what it was shown before, and the
// same one for farEvery snapshots at most.
func TestFarSlotsLagButNeverStepBack(t *testing.T) {
	const k = 3
	for seed := range uint64(20) {
		w := newWorld(seed, 80)
		enc := farEncoder(k)
		cl, dec := wire.NewClient(8), wire.NewDecoder(8)
		farSide := make([]bool, len(w.ents))
		var hist [][]wire.EntityState // the world at each snapshot
		shown := map[uint64]int{}     // entity id → the snapshot whose motion it was last shown
		var pendingAcks []uint32
		var buf []byte
		farShown := 0
		for tick := uint32(2); tick < 600; tick += 2 {
			w.advance()
			for i := range farSide {
				if w.r.IntN(20) == 0 {
					farSide[i] = !farSide[i]
				}
			}
			vis := w.encode(enc, tick)
			hist = append(hist, slices.Clone(w.ents))
			n := len(hist) - 1
			var near, far []int32
			for _, s := range vis {
				if farSide[s] {
					far = append(far, s)
					if w.r.IntN(10) == 0 {
						near = append(near, s) // in both lists: near
					}
				} else {
					near = append(near, s)
				}
			}
			buf, _ = enc.EncodeFar(buf[:0], cl, 0, 3, near, far)
			if w.r.IntN(10) < 2 { // frame lost
				continue
			}
			snap, err := dec.Decode(buf)
			if err != nil {
				t.Fatalf("seed %d tick %d: %v", seed, tick, err)
			}
			want := w.expect()
			if len(snap.Entities) != len(want) {
				t.Fatalf("seed %d tick %d: %d entities shown, want %d", seed, tick, len(snap.Entities), len(want))
			}
			for i, e := range snap.Entities {
				cur := want[i]
				if e.Slot != cur.Slot || e.ID != cur.ID || e.Kind != cur.Kind || e.State != cur.State || e.Template != cur.Template {
					t.Fatalf("seed %d tick %d: shown %+v, want %+v", seed, tick, e, cur)
				}
				onlyFar := farSide[e.Slot] && !slices.Contains(near, e.Slot)
				// The newest snapshot whose motion of the entity this is.
				at := -1
				for j := n; j >= 0 && j > n-k; j-- {
					h := hist[j][e.Slot]
					if h.ID == e.ID && h.X == e.X && h.Y == e.Y && h.Facing == e.Facing {
						at = j
						break
					}
				}
				switch {
				case !onlyFar && at != n:
					t.Fatalf("seed %d tick %d: near slot %d shows %+v, want %+v", seed, tick, e.Slot, e.EntityState, cur.EntityState)
				case at < 0:
					t.Fatalf("seed %d tick %d: far slot %d shows a position older than %d snapshots", seed, tick, e.Slot, k)
				case at < shown[e.ID]:
					t.Fatalf("seed %d tick %d: slot %d stepped back from snapshot %d to %d", seed, tick, e.Slot, shown[e.ID], at)
				}
				if at < n {
					farShown++
				}
				shown[e.ID] = at
			}
			pendingAcks = w.ackSome(cl, append(pendingAcks, tick))
		}
		if farShown == 0 {
			t.Fatalf("seed %d: no entity was ever shown lagging: the test did not exercise far slots", seed)
		}
	}
}

// TestFarSlotsCostLess: entities that move on every snapshot cost a client that sees
// them from afar about a farEvery-th of what they cost one that sees them near, and a
// change of state of a far entity reaches it at once.
func TestFarSlotsCostLess(t *testing.T) {
	enc := wire.NewEncoder(8)
	enc.SetRates(30, 15) // a snapshot every second tick
	near, far := wire.NewClient(8), wire.NewClient(8)
	nearDec, farDec := wire.NewDecoder(8), wire.NewDecoder(8)
	slots := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	var nearBytes, farBytes int
	var buf []byte
	for i := range 64 {
		tick := uint32(2 + 2*i)
		enc.Begin(tick)
		for _, s := range slots {
			st := wire.EntityState{ID: uint64(s), Kind: 2, X: int32(i) * 3, Y: s * 100}
			if s == 1 && i >= 40 {
				st.State = 3 // chasing, from snapshot 40 on
			}
			enc.Set(s, st)
		}
		buf, _ = enc.EncodeFar(buf[:0], near, 0, -1, slots, nil)
		if _, err := nearDec.Decode(buf); err != nil {
			t.Fatal(err)
		}
		if i >= 8 {
			nearBytes += len(buf)
		}
		near.Ack(tick)
		buf, _ = enc.EncodeFar(buf[:0], far, 0, -1, nil, slots)
		snap, err := farDec.Decode(buf)
		if err != nil {
			t.Fatal(err)
		}
		if i >= 8 {
			farBytes += len(buf)
		}
		far.Ack(tick)
		if got := snap.Find(1).State; i >= 40 && got != 3 {
			t.Fatalf("snapshot %d: a far entity's new state %d not shown at once", i, got)
		}
	}
	// 8 header bytes a frame, then 4 bytes an update record.
	const frames, header = 56, 8
	nearRecords, farRecords := float64(nearBytes-frames*header), float64(farBytes-frames*header)
	if ratio := farRecords / nearRecords; ratio > 1.2/wire.DefaultFarEvery {
		t.Fatalf("far updates cost %.0f bytes, near %.0f: %.2f of it, want about 1/%d", farRecords, nearRecords, ratio, wire.DefaultFarEvery)
	}
}

// farEncoder returns an encoder of 8 tables whose distant entities move every k
// snapshots.
func farEncoder(k int) *wire.Encoder {
	enc := wire.NewEncoder(8)
	enc.SetFarEvery(k)
	return enc
}

// TestFarSlotsStaggeredClients: with a table every tick and each client sent every
// second one (half of a map's clients at one tick, half at the next), a client that sees
// every entity from afar sees each of them move once in farEvery of its own snapshots,
// odd and even slots alike, never step back, and never lag more than farEvery of its
// snapshots.
func TestFarSlotsStaggeredClients(t *testing.T) {
	const k, snapshots = 4, 120
	enc := farEncoder(k)
	enc.SetRates(30, 15)
	slots := []int32{0, 1, 2, 3, 4, 5, 6, 7}
	type client struct {
		cl    *wire.Client
		dec   *wire.Decoder
		shown map[int32]int32 // slot → the tick whose position it was last shown
		moves map[int32]int
	}
	clients := [2]*client{}
	for i := range clients {
		clients[i] = &client{cl: wire.NewClient(8), dec: wire.NewDecoder(8), shown: map[int32]int32{}, moves: map[int32]int{}}
	}
	var buf []byte
	for tick := uint32(1); tick <= 2*snapshots; tick++ {
		enc.Begin(tick)
		for _, s := range slots {
			enc.Set(s, wire.EntityState{ID: uint64(s) + 1, Kind: 2, X: 3 * int32(tick), Y: s})
		}
		c := clients[tick%2]
		buf, _ = enc.EncodeFar(buf[:0], c.cl, 0, -1, nil, slots)
		snap, err := c.dec.Decode(buf)
		if err != nil {
			t.Fatalf("tick %d: %v", tick, err)
		}
		c.cl.Ack(tick)
		for _, e := range snap.Entities {
			at := e.X / 3 // the tick whose position this is
			last, seen := c.shown[e.Slot]
			switch {
			case at > int32(tick) || at <= int32(tick)-2*k:
				t.Fatalf("tick %d: slot %d shows tick %d's position, want one of the last %d snapshots'", tick, e.Slot, at, k)
			case seen && at < last:
				t.Fatalf("tick %d: slot %d stepped back from tick %d to %d", tick, e.Slot, last, at)
			case seen && at != last && tick > 4*k:
				c.moves[e.Slot]++
			}
			c.shown[e.Slot] = at
		}
	}
	counted := snapshots - 2*k // the snapshots after the first 4k ticks
	for i, c := range clients {
		for _, s := range slots {
			if m := c.moves[s]; m < counted/k-1 || m > counted/k+1 {
				t.Fatalf("client %d: slot %d moved on %d of %d snapshots, want about %d", i, s, m, counted, counted/k)
			}
		}
	}
}
