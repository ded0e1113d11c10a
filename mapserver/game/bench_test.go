package game_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/loop"
	"github.com/mapyard/mapyard/mapserver/mapgen"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/orchestrator/control"
)

// BenchmarkTickW1 is the tick goroutine's work under workload W1 without the network:
// a 2000 x 2000 map with 200 NPCs and N players each queueing one input per tick and
// turning about every second; every tick steps the game, every second tick (15 of 30
// Hz) builds every player's snapshot. One op is one tick; bytes/snapshot is the mean
// frame size.
func BenchmarkTickW1(b *testing.B) {
	for _, n := range []int{100, 250, 500, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			cfg, err := mapgen.Resolve("w1-1", mapgen.DefaultMapID, nil)
			if err != nil {
				b.Fatal(err)
			}
			cfg.GenerationRules.NPCDensity = 50 // 200 NPCs on 4 km²
			w, err := mapgen.Generate(cfg)
			if err != nil {
				b.Fatal(err)
			}
			g, err := game.New(w, cfg, 30)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			ids := make([]string, n)
			views := make([]loop.View, n)
			dirs := make([][2]int8, n)
			bw, bh := w.Width/100, w.Height/100
			for i := range ids {
				ids[i] = fmt.Sprintf("bot-%d", i)
				// Spread over the map, as W1's random walks leave the bots after the
				// warm-up (the few spawn points would crowd them otherwise).
				at := &control.CharacterState{MapID: cfg.MapID, X: float64(rng.IntN(int(bw))), Y: float64(rng.IntN(int(bh)))}
				if err := g.Spawn(ids[i], at); err != nil {
					b.Fatal(err)
				}
				views[i] = g.NewView(ids[i])
			}
			buf := make([]byte, 0, 4096)
			var bytes, frames int
			in := make([]sim.Input, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for tick := 1; tick <= b.N; tick++ {
				for i, id := range ids {
					if rng.IntN(30) == 0 || dirs[i] == [2]int8{} {
						dirs[i] = [2]int8{int8(rng.IntN(255) - 127), int8(rng.IntN(255) - 127)}
					}
					in[0] = sim.Input{Seq: uint64(tick), DX: dirs[i][0], DY: dirs[i][1]}
					g.Apply(id, in)
				}
				g.Step()
				if tick%2 == 0 {
					for _, v := range views {
						frame, _ := v.Snapshot(buf[:0])
						bytes += len(frame)
						frames++
						v.Ack(uint64(g.Sim().Tick()))
					}
				}
			}
			if frames > 0 {
				b.ReportMetric(float64(bytes)/float64(frames), "bytes/snapshot")
			}
		})
	}
}

// BenchmarkTickW3 is the tick goroutine's work under workload W3 without the network:
// N players within 40 units of one spot on the default map, idle or each walking a
// random direction turned about every second, with the view cap (128) and without it
// (cap 0). One op is one tick; every second tick builds every player's snapshot.
func BenchmarkTickW3(b *testing.B) {
	for _, n := range []int{1000} {
		for _, move := range []bool{false, true} {
			for _, viewCap := range []int{0, game.DefaultViewCap} {
				b.Run(fmt.Sprintf("N=%d/moving=%v/cap=%d", n, move, viewCap), func(b *testing.B) {
					benchCrowd(b, n, move, viewCap)
				})
			}
		}
	}
}

func benchCrowd(b *testing.B, n int, move bool, viewCap int) {
	cfg, err := mapgen.Resolve("w3-1", mapgen.DefaultMapID, nil)
	if err != nil {
		b.Fatal(err)
	}
	w, err := mapgen.Generate(cfg)
	if err != nil {
		b.Fatal(err)
	}
	g, err := game.New(w, cfg, 30)
	if err != nil {
		b.Fatal(err)
	}
	g.SetViewCap(viewCap)
	spot := g.Sim().SpawnPoint(0)
	rng := rand.New(rand.NewPCG(3, 4))
	ids := make([]string, n)
	views := make([]loop.View, n)
	dirs := make([][2]int8, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("bot-%d", i)
		at := &control.CharacterState{MapID: cfg.MapID,
			X: float64(spot.X)/sim.QuantaPerUnit + float64(rng.IntN(81)-40),
			Y: float64(spot.Y)/sim.QuantaPerUnit + float64(rng.IntN(81)-40)}
		if err := g.Spawn(ids[i], at); err != nil {
			b.Fatal(err)
		}
		views[i] = g.NewView(ids[i])
	}
	buf := make([]byte, 0, 16384)
	var bytes, frames int
	in := make([]sim.Input, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for tick := 1; tick <= b.N; tick++ {
		if move {
			for i, id := range ids {
				if rng.IntN(30) == 0 || dirs[i] == [2]int8{} {
					dirs[i] = [2]int8{int8(rng.IntN(255) - 127), int8(rng.IntN(255) - 127)}
				}
				in[0] = sim.Input{Seq: uint64(tick), DX: dirs[i][0], DY: dirs[i][1]}
				g.Apply(id, in)
			}
		}
		g.Step()
		if tick%2 == 0 {
			for _, v := range views {
				frame, _ := v.Snapshot(buf[:0])
				bytes += len(frame)
				frames++
				v.Ack(uint64(g.Sim().Tick()))
			}
		}
	}
	if frames > 0 {
		b.ReportMetric(float64(bytes)/float64(frames), "bytes/snapshot")
	}
}
