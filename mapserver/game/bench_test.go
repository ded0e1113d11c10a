package game_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// BenchmarkTickW1 is the tick goroutine's work under workload W1 without the network:
// a 2000 x 2000 map with 200 NPCs and N players each queueing one input per tick and
// turning about every second; every tick steps the game and builds the snapshots of
// half the players (each player's every second tick: 15 of 30 Hz). One op is one tick; bytes/snapshot is the mean
// frame size.
func BenchmarkTickW1(b *testing.B) {
	for _, n := range []int{100, 250, 500, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			g, cfg, w := benchGame(b, "w1-1", func(c *mapgen.MapConfig) {
				c.GenerationRules.NPCDensity = 50 // 200 NPCs on 4 km²
			})
			rng := rand.New(rand.NewPCG(1, 2))
			bw, bh := w.Width/100, w.Height/100
			// Spread over the map, as W1's random walks leave the bots after the warm-up
			// (the few spawn points would crowd them otherwise).
			runTicks(b, g, rng, true, spawnBots(b, g, n, func() *record.CharacterState {
				return &record.CharacterState{MapID: cfg.MapID, X: float64(rng.IntN(int(bw))), Y: float64(rng.IntN(int(bh)))}
			}))
		})
	}
}

// BenchmarkTickW3 is the tick goroutine's work under workload W3 without the network:
// N players within 40 units of one spot on the default map, idle or each walking as in
// W1, with the view cap (128) and without it (cap 0). One op is one tick; every tick
// builds half the players' snapshots. In the lateAcks variant 3 players in 10
// acknowledge each snapshot one snapshot late, as clients with a longer round trip do,
// so a round's clients have two baselines.
func BenchmarkTickW3(b *testing.B) {
	type variant struct {
		move     bool
		viewCap  int
		lateAcks int
	}
	variants := []variant{{false, 0, 0}, {false, game.DefaultViewCap, 0}, {true, 0, 0}, {true, game.DefaultViewCap, 0}, {true, game.DefaultViewCap, 3}}
	for _, v := range variants {
		name := fmt.Sprintf("N=1000/moving=%v/cap=%d", v.move, v.viewCap)
		if v.lateAcks > 0 {
			name += "/lateAcks"
		}
		b.Run(name, func(b *testing.B) {
			g, cfg, _ := benchGame(b, "w3-1", nil)
			g.SetViewCap(v.viewCap)
			spot := g.Sim().SpawnPoint(0)
			rng := rand.New(rand.NewPCG(3, 4))
			near := func(q int32) float64 { return float64(q)/sim.QuantaPerUnit + float64(rng.IntN(81)-40) }
			bots := spawnBots(b, g, 1000, func() *record.CharacterState {
				return &record.CharacterState{MapID: cfg.MapID, X: near(spot.X), Y: near(spot.Y)}
			})
			for i := range bots {
				bots[i].late = i%10 < v.lateAcks
			}
			runTicks(b, g, rng, v.move, bots)
		})
	}
}

// benchGame builds the game of the default map as instance, its config changed by
// edit (if any).
func benchGame(b *testing.B, instance string, edit func(*mapgen.MapConfig)) (*game.Game, mapgen.MapConfig, *mapgen.World) {
	cfg, err := mapgen.Resolve(instance, mapgen.DefaultMapID, nil)
	if err != nil {
		b.Fatal(err)
	}
	if edit != nil {
		edit(&cfg)
	}
	w, err := mapgen.Generate(cfg)
	if err != nil {
		b.Fatal(err)
	}
	g, err := game.New(w, cfg, 30)
	if err != nil {
		b.Fatal(err)
	}
	return g, cfg, w
}

// bot is one benchmark player: its character and view.
type bot struct {
	id   string
	view gameapi.View
	dir  [2]int8
	late bool // acknowledges the snapshot before the one it was just sent
}

// spawnBots spawns n players where at says, each with a view.
func spawnBots(b *testing.B, g *game.Game, n int, at func() *record.CharacterState) []bot {
	bots := make([]bot, n)
	for i := range bots {
		bots[i].id = fmt.Sprintf("bot-%d", i)
		if err := join(g, bots[i].id, at()); err != nil {
			b.Fatal(err)
		}
		bots[i].view = view(g, bots[i].id)
	}
	return bots
}

// runTicks runs b.N ticks: with move, every bot queues one input per tick, turning
// about every second; every tick builds the snapshots of half the bots, as the loop
// does (each bot's every second tick), which the bot acknowledges (a late bot the one
// before it).
func runTicks(b *testing.B, g *game.Game, rng *rand.Rand, move bool, bots []bot) {
	buf := make([]byte, 0, 16384)
	var bytes, frames int
	in := make([]sim.Input, 1)
	var out gameapi.Recorder // reused, as the kit's is
	b.ReportAllocs()
	b.ResetTimer()
	for tick := 1; tick <= b.N; tick++ {
		for i := range bots {
			if !move {
				break
			}
			p := &bots[i]
			if rng.IntN(30) == 0 || p.dir == [2]int8{} {
				p.dir = [2]int8{int8(rng.IntN(255) - 127), int8(rng.IntN(255) - 127)}
			}
			in[0] = sim.Input{Seq: uint64(tick), DX: p.dir[0], DY: p.dir[1]}
			g.Command(p.id, uint64(tick), in, &out)
		}
		g.Step(&out)
		out.Reset()
		for i := tick % 2; i < len(bots); i += 2 {
			p := &bots[i]
			frame, _ := p.view.Snapshot(buf[:0])
			bytes += len(frame)
			frames++
			if p.late && tick > 2 {
				p.view.Ack(uint64(g.Sim().Tick() - 2))
			} else {
				p.view.Ack(uint64(g.Sim().Tick()))
			}
		}
	}
	if frames > 0 {
		b.ReportMetric(float64(bytes)/float64(frames), "bytes/snapshot")
	}
}

// BenchmarkIdlePlayer is what one idle player on W1's map (200 NPCs wandering) is sent:
// one player standing at the map's first spawn point, alone but for the NPCs, its
// snapshot built and acknowledged 15 times a second. One op is one tick; bytes/snapshot
// is the mean frame, kbit/s the downstream of its snapshots with their 2-byte WebSocket
// header (pongs and events aside), entities/snapshot what its view holds.
func BenchmarkIdlePlayer(b *testing.B) {
	g, cfg, _ := benchGame(b, "w1-1", func(c *mapgen.MapConfig) {
		c.GenerationRules.NPCDensity = 50 // 200 NPCs on 4 km², as W1
	})
	spot := g.Sim().SpawnPoint(0)
	bots := spawnBots(b, g, 1, func() *record.CharacterState {
		return &record.CharacterState{MapID: cfg.MapID, X: float64(spot.X) / sim.QuantaPerUnit, Y: float64(spot.Y) / sim.QuantaPerUnit}
	})
	buf := make([]byte, 0, 4096)
	dec := wire.NewDecoder(wire.DefaultClientRing)
	var out gameapi.Recorder
	var bytes, frames, inView int
	snapshot := func() int {
		frame, _ := bots[0].view.Snapshot(buf[:0])
		buf = frame
		s, err := dec.Decode(frame)
		if err != nil {
			b.Fatal(err)
		}
		bots[0].view.Ack(uint64(s.Tick))
		return len(s.Entities)
	}
	for range 60 { // past the first, full snapshot
		g.Step(&out)
		out.Reset()
		snapshot()
	}
	b.ResetTimer()
	for tick := 1; tick <= b.N; tick++ {
		g.Step(&out)
		out.Reset()
		if tick%2 == 0 {
			inView += snapshot()
			bytes += len(buf)
			frames++
		}
	}
	if frames > 0 {
		b.ReportMetric(float64(inView)/float64(frames), "entities/snapshot")
		b.ReportMetric(float64(bytes)/float64(frames), "bytes/snapshot")
		b.ReportMetric(float64(bytes+2*frames)/float64(frames)*15*8/1000, "kbit/s")
	}
}
