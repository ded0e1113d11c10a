package sim_test

import (
	"reflect"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/sim"
)

// perceptionWorld is 400 × 400 units of open ground, with a wall (a box collider 1 m
// thick, 20 m long) at x = 210 m when walled.
func perceptionWorld(walled bool) *mapgen.World {
	w := &mapgen.World{Width: 40000, Height: 40000}
	if walled {
		w.Colliders = []mapgen.Collider{{Shape: mapgen.ShapeBox, X: 21000, Y: 20000, HalfX: 50, HalfY: 1000}}
	}
	return w
}

// perceptionRun places an NPC at (200 m, 200 m) facing east and a player at offset
// (dx, dy) metres, runs ticks and returns the NPC's states at every change.
func perceptionRun(t *testing.T, walled bool, dx, dy int32, ticks int) (*sim.State, int32, []sim.PerceptionEvent) {
	t.Helper()
	s, err := sim.New(perceptionWorld(walled), sim.Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	npc, _ := s.AddNPC(sim.Vec{X: 200 * 16, Y: 200 * 16}, 1, 0)
	s.AddPlayer(sim.PlayerState{Pos: sim.Vec{X: (200 + dx) * 16, Y: (200 + dy) * 16}})
	var evs []sim.PerceptionEvent
	for range ticks {
		evs = append(evs, s.Step().Perception...)
	}
	return s, npc, evs
}

func states(evs []sim.PerceptionEvent) []uint8 {
	var out []uint8
	for _, e := range evs {
		out = append(out, e.To)
	}
	return out
}

func TestPerception_SeenInFrontWithinRange(t *testing.T) {
	s, npc, evs := perceptionRun(t, false, 5, 1, 60)
	want := []uint8{sim.NPCSuspicious, sim.NPCAlert, sim.NPCChasing}
	if got := states(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("states %v, want %v (idle → suspicious → alert → chasing)", got, want)
	}
	for i, e := range evs {
		if e.Slot != npc || e.Target == 0 || (i > 0 && e.From != evs[i-1].To) {
			t.Fatalf("event %d %+v", i, e)
		}
	}
	if s.Entities[npc].State != sim.NPCChasing {
		t.Fatalf("NPC state %d, want chasing", s.Entities[npc].State)
	}
}

func TestPerception_NotSeen(t *testing.T) {
	for _, tc := range []struct {
		name   string
		walled bool
		dx, dy int32
	}{
		{"Behind", false, -5, 0},
		{"OutsideFieldOfView", false, 3, 8}, // about 70° off the facing
		{"TooFar", false, 20, 0},
		{"BehindAWall", true, 14, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// 40 ticks: before the NPC's first random turn (after 1.5 s at the earliest).
			_, npc, evs := perceptionRun(t, tc.walled, tc.dx, tc.dy, 40)
			if len(evs) != 0 {
				t.Fatalf("NPC %d changed state %v for a player it cannot see", npc, states(evs))
			}
		})
	}
	t.Run("SameDistanceWithoutTheWall", func(t *testing.T) {
		if _, _, evs := perceptionRun(t, false, 14, 0, 40); len(evs) == 0 {
			t.Fatal("the wall test proves nothing: the NPC does not see the player without it either")
		}
	})
}

// TestPerception_ChaseAndGiveUp: a chasing NPC closes in on its target; when the
// target runs out of sight (players are faster) it gives up and calms down to idle.
func TestPerception_ChaseAndGiveUp(t *testing.T) {
	s, npc, _ := perceptionRun(t, false, 10, 0, 60)
	if s.Entities[npc].State != sim.NPCChasing {
		t.Fatalf("NPC state %d after 2 s in plain view, want chasing", s.Entities[npc].State)
	}
	player := int32(1)
	dist := func() int64 {
		a, b := s.Entities[npc].Pos, s.Entities[player].Pos
		dx, dy := int64(a.X-b.X), int64(a.Y-b.Y)
		return dx*dx + dy*dy
	}
	before := dist()
	for range 15 {
		s.Step()
	}
	if dist() >= before {
		t.Fatal("the chasing NPC does not close in")
	}
	// The player runs east at 5 units/s; the NPC follows at 3 and loses it.
	var evs []sim.PerceptionEvent
	for i := range 30 * 30 {
		s.Enqueue(player, []sim.Input{{Seq: uint64(i + 1), DX: 1}})
		evs = append(evs, s.Step().Perception...)
	}
	got := states(evs)
	if want := []uint8{sim.NPCAlert, sim.NPCSuspicious, sim.NPCIdle}; !reflect.DeepEqual(got, want) {
		t.Fatalf("states %v after the player ran away, want %v (gave up, calmed down)", got, want)
	}
}

// TestPerception_Deterministic: the same seed and inputs give the same states and
// events on every run.
func TestPerception_Deterministic(t *testing.T) {
	run := func() []sim.PerceptionEvent {
		_, w := defaultWorld(t)
		s, _ := sim.New(w, sim.Options{Seed: 9, NPCs: 200})
		bw, bh := s.Colliders().Bounds()
		var slots []int32
		for i := range 100 {
			sl, _ := s.AddPlayer(sim.PlayerState{Pos: sim.Vec{X: int32(i*7919) % bw, Y: int32(i*104729) % bh}})
			slots = append(slots, sl)
		}
		var evs []sim.PerceptionEvent
		for tick := range 300 {
			for k, sl := range slots {
				s.Enqueue(sl, []sim.Input{{Seq: uint64(tick + 1), DX: int8(k%3 - 1), DY: int8(k/3%3 - 1)}})
			}
			evs = append(evs, s.Step().Perception...)
		}
		return evs
	}
	a, b := run(), run()
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs differ: %d and %d events", len(a), len(b))
	}
}

func TestFacingOf(t *testing.T) {
	for _, tc := range []struct {
		dx, dy int8
		want   uint8
	}{{1, 0, 0}, {1, 1, 32}, {0, 1, 64}, {-1, 1, 96}, {-1, 0, 128}, {-1, -1, 160}, {0, -1, 192}, {1, -1, 224}} {
		if got := sim.FacingOf(tc.dx, tc.dy); got != tc.want {
			t.Errorf("FacingOf(%d, %d) = %d, want %d", tc.dx, tc.dy, got, tc.want)
		}
	}
}
