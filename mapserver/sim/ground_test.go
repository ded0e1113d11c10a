package sim_test

import (
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/sim"
)

// onGround reports whether the body centre p stands on a ground cell of w.
func onGround(w *mapgen.World, p sim.Vec) bool {
	n := &w.Nav
	return n.GroundAt(int(sim.ToCentimetres(p.X)/n.CellSize), int(sim.ToCentimetres(p.Y)/n.CellSize))
}

// blockedCell returns the centre (in quanta) of a ground-blocked cell of w (water or
// too steep) with a ground cell east of it, failing the test when there is none.
func blockedCell(t *testing.T, w *mapgen.World) sim.Vec {
	t.Helper()
	n := &w.Nav
	for r := 2; r < n.Rows-2; r++ {
		for c := 2; c < n.Cols-3; c++ {
			if !n.GroundAt(c, r) && n.GroundAt(c+1, r) && n.GroundAt(c+2, r) {
				half := n.CellSize / 2
				return sim.Vec{X: sim.FromCentimetres(int32(c)*n.CellSize + half), Y: sim.FromCentimetres(int32(r)*n.CellSize + half)}
			}
		}
	}
	t.Fatal("the world has no blocked ground next to open ground")
	return sim.Vec{}
}

func groundWorld(t *testing.T) *mapgen.World {
	t.Helper()
	cfg, err := mapgen.Template(mapgen.DefaultMapID)
	if err != nil {
		t.Fatal(err)
	}
	cfg.StaticCollider.BlockWater = true
	w, err := mapgen.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestPlayersStayOnGround: a player walking into water or a slope too steep stops at
// its edge (sliding along it), and one placed there is moved to the nearest land.
func TestPlayersStayOnGround(t *testing.T) {
	w := groundWorld(t)
	s, err := sim.New(w, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	water := blockedCell(t, w)
	cell := sim.FromCentimetres(w.Nav.CellSize)
	slot, _ := s.AddPlayer(sim.PlayerState{Pos: sim.Vec{X: water.X + 2*cell, Y: water.Y}})
	if !onGround(w, s.Entities[slot].Pos) {
		t.Fatal("player placed off the ground")
	}
	for i := range 120 { // four seconds west, into the blocked cell, then north-west
		dy := int8(0)
		if i >= 60 {
			dy = 40
		}
		s.Enqueue(slot, []sim.Input{{Seq: uint64(i + 1), DX: -100, DY: dy}})
		s.Step()
		if p := s.Entities[slot].Pos; !onGround(w, p) {
			t.Fatalf("tick %d: player at %+v stands on blocked ground", i, p)
		}
	}

	placed, _ := s.AddPlayer(sim.PlayerState{Pos: water})
	p := s.Entities[placed].Pos
	if p == water || !onGround(w, p) {
		t.Fatalf("a player placed on blocked ground at %+v stays at %+v", water, p)
	}
	if dx, dy := int64(p.X-water.X), int64(p.Y-water.Y); dx*dx+dy*dy > int64(4*cell*cell) {
		t.Fatalf("moved from %+v to %+v: not the nearest land", water, p)
	}
}

// TestNPCsStayOnGround: wandering NPCs never step onto blocked ground.
func TestNPCsStayOnGround(t *testing.T) {
	w := groundWorld(t)
	s, err := sim.New(w, sim.Options{NPCs: 300, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	for tick := range 900 {
		s.Step()
		for i, e := range s.Entities {
			if e.Kind == sim.KindNPC && !onGround(w, e.Pos) {
				t.Fatalf("tick %d: NPC %d at %+v stands on blocked ground", tick, i, e.Pos)
			}
		}
	}
}
