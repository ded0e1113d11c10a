package wire_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mapyard/mapyard/mapserver/aoi"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// w1 drives workload W1 (../shared/WORKLOADS.md) in process: the default 2000 x 2000
// map, 200 wandering NPCs, n players walking at 5 units/s and turning about every
// second, 30 ticks and 15 snapshots per second, a 200-unit AOI grid, and every client
// acknowledging each snapshot before the next one (one snapshot of round trip).
type w1 struct {
	s       *sim.State
	grid    *aoi.Grid
	enc     *wire.Encoder
	r       *rand.Rand
	players []w1Player
	vis     []int32
	buf     []byte
	// facing is each slot's facing as the snapshot shows it: the simulation's, or where
	// the entity last walked while the simulation leaves it at zero.
	facing []uint8
}

type w1Player struct {
	slot   int32
	dx, dy int8
	turnAt uint64
	seq    uint64
	client *wire.Client
	last   uint32
}

func newW1(t testing.TB, n int) *w1 {
	t.Helper()
	cfg, err := mapgen.Template(mapgen.DefaultMapID)
	if err != nil {
		t.Fatal(err)
	}
	world, err := mapgen.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(world, sim.Options{Seed: 1, NPCs: 200})
	if err != nil {
		t.Fatal(err)
	}
	bw, bh := s.Colliders().Bounds()
	grid, err := aoi.New(bw, bh, 200*sim.QuantaPerUnit, 10*sim.QuantaPerUnit)
	if err != nil {
		t.Fatal(err)
	}
	h := &w1{s: s, grid: grid, enc: wire.NewEncoder(wire.DefaultRing), r: rand.New(rand.NewPCG(2, 3)), vis: make([]int32, 0, 1500)}
	for range n {
		p := sim.Vec{X: h.r.Int32N(bw), Y: h.r.Int32N(bh)}
		slot, _ := s.AddPlayer(sim.PlayerState{Pos: p})
		h.players = append(h.players, w1Player{slot: slot, client: wire.NewClient(wire.DefaultClientRing)})
	}
	h.facing = make([]uint8, len(s.Entities))
	return h
}

// tick runs one simulation tick with one input per player.
func (h *w1) tick() {
	for i := range h.players {
		p := &h.players[i]
		if h.s.Tick() >= p.turnAt {
			p.dx, p.dy = int8(h.r.IntN(3)-1), int8(h.r.IntN(3)-1)
			p.turnAt = h.s.Tick() + uint64(20+h.r.IntN(21))
		}
		p.seq++
		h.s.Enqueue(p.slot, []sim.Input{{Seq: p.seq, DX: p.dx, DY: p.dy}})
	}
	h.s.Step()
}

// prepare updates the grid and the encoder's table for a snapshot of the current tick.
func (h *w1) prepare() {
	h.enc.Begin(uint32(h.s.Tick()))
	for slot, e := range h.s.Entities {
		if e.Kind == sim.KindNone {
			continue
		}
		h.grid.Update(int32(slot), e.Pos.X, e.Pos.Y)
		f := &h.facing[slot]
		switch {
		case e.Facing != 0:
			*f = e.Facing
		case e.DX != 0 || e.DY != 0:
			*f = facingOf(e.DX, e.DY)
		}
		h.enc.Set(int32(slot), wire.EntityState{ID: uint64(e.ID), Kind: uint8(e.Kind), X: e.Pos.X, Y: e.Pos.Y, Facing: *f, State: e.State, Template: e.Template})
	}
}

// facingOf is the facing of a walking direction in 1/256 turns, so that W1 pays for
// facing as entities turn: players when they change direction, NPCs at each turn.
func facingOf(dx, dy int8) uint8 {
	return uint8(int(math.Round(math.Atan2(float64(dy), float64(dx))*128/math.Pi)) & 255)
}

// encode builds player i's snapshot into h.buf, acknowledges the previous one, and
// returns the number of visible entities.
func (h *w1) encode(i int) int {
	p := &h.players[i]
	if p.last != 0 {
		p.client.Ack(p.last)
	}
	h.vis = h.grid.Query(p.slot, h.vis[:0])
	h.buf, _ = h.enc.Encode(h.buf[:0], p.client, h.s.Players[p.slot].LastSeq, p.slot, h.vis)
	p.last = uint32(h.s.Tick())
	return len(h.vis)
}

// run simulates seconds of W1 after a warm-up and returns the bytes per visible entity
// per snapshot, framing included, and the entities in view per client.
func (h *w1) run(warm, seconds int) (bytesPerEntity, inView float64) {
	var bytes, ents int
	for tick := range (warm + seconds) * 30 {
		h.tick()
		if tick%2 == 1 {
			h.prepare()
			for i := range h.players {
				n := h.encode(i)
				if tick >= warm*30 {
					bytes += len(h.buf)
					ents += n
				}
			}
		}
	}
	snaps := seconds * 15 * len(h.players)
	return float64(bytes) / float64(ents), float64(ents) / float64(snaps)
}

// TestW1BytesPerEntity holds the snapshot encoding to its byte budget on W1: at most
// 3.5 bytes per visible entity per snapshot on average, framing and facing included
// (about a quarter of the 13 bytes Colyseus' schema patches cost on the same workload).
func TestW1BytesPerEntity(t *testing.T) {
	for _, n := range []int{100, 500} {
		bpe, view := newW1(t, n).run(2, 10)
		t.Logf("W1 N=%d: %.2f bytes per visible entity per snapshot, %.1f entities in view, %.2f kbit/s per client",
			n, bpe, view, bpe*view*15*8/1000)
		if bpe > 3.5 || view < 10 {
			t.Errorf("W1 N=%d: %.2f bytes per entity (budget 3.5) at %.1f in view", n, bpe, view)
		}
	}
}

// BenchmarkEncodeW1 measures one snapshot round for all clients of W1 at N players
// (grid update and encoder table once, then per client AOI query and encode).
func BenchmarkEncodeW1(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			h := newW1(b, n)
			h.run(2, 1)
			var bytes, ents int
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				h.tick()
				h.tick()
				b.StartTimer()
				h.prepare()
				for i := range h.players {
					ents += h.encode(i)
					bytes += len(h.buf)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/client")
			b.ReportMetric(float64(bytes)/float64(ents), "B/entity")
			b.ReportMetric(float64(ents)/float64(b.N*n), "inview")
		})
	}
}

// BenchmarkDecodeW1 measures a client decoding its W1 snapshot stream.
func BenchmarkDecodeW1(b *testing.B) {
	h := newW1(b, 500)
	var frames [][]byte
	for tick := range 30 * 20 {
		h.tick()
		if tick%2 == 1 {
			h.prepare()
			h.encode(0)
			frames = append(frames, append([]byte(nil), h.buf...))
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var dec *wire.Decoder
	for i := range b.N {
		k := i % len(frames)
		if k == 0 {
			dec = wire.NewDecoder(wire.DefaultRing)
		}
		if _, err := dec.Decode(frames[k]); err != nil {
			b.Fatal(err)
		}
	}
}
