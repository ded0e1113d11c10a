package sim_test

import (
	"math/rand/v2"
	"testing"

	"github.com/mapyard/mapyard/mapserver/sim"
)

// BenchmarkStepW1 measures one tick of workload W1 at its largest size: the default
// map, 200 wandering NPCs and 1000 players each running one input per tick; with NPC
// perception at its default rate (one pass every 6 ticks, so the figure is the average
// tick), every tick, and off, to show what perception costs.
func BenchmarkStepW1(b *testing.B) {
	for _, tc := range []struct {
		name  string
		every int
	}{{"perception=default", 0}, {"perception=everyTick", 1}, {"perception=off", 1 << 30}} {
		b.Run(tc.name, func(b *testing.B) { benchStepW1(b, tc.every) })
	}
}

func benchStepW1(b *testing.B, every int) {
	_, w := defaultWorld(b)
	s, err := sim.New(w, sim.Options{Seed: 1, NPCs: 200, PerceptionEvery: every})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	bw, bh := s.Colliders().Bounds()
	slots := make([]int32, 1000)
	for i := range slots {
		slots[i], _ = s.AddPlayer(sim.PlayerState{Pos: sim.Vec{X: r.Int32N(bw), Y: r.Int32N(bh)}})
	}
	in := make([]sim.Input, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for k, slot := range slots {
			in[0] = sim.Input{Seq: uint64(i + 1), DX: int8((k+i/30)%3 - 1), DY: int8((k/3+i/30)%3 - 1)}
			s.Enqueue(slot, in)
		}
		s.Step()
	}
}
