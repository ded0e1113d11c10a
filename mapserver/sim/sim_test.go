package sim_test

import (
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/sim"
)

func defaultWorld(t testing.TB) (mapgen.MapConfig, *mapgen.World) {
	t.Helper()
	cfg, err := mapgen.Template(mapgen.DefaultMapID)
	if err != nil {
		t.Fatal(err)
	}
	w, err := mapgen.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, w
}

// emptyWorld is a world without colliders: bounds only.
func emptyWorld(widthCm, heightCm int32) *mapgen.World {
	return &mapgen.World{Width: widthCm, Height: heightCm}
}

func TestSpeedOverOneSecond(t *testing.T) {
	s, err := sim.New(emptyWorld(200000, 200000), sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := sim.Vec{X: 16000, Y: 16000}
	slot, _ := s.AddPlayer(sim.PlayerState{Pos: start})
	dirs := [][2]int8{{1, 0}, {0, -1}, {1, 1}, {-127, 127}, {3, -4}}
	for _, d := range dirs {
		p0 := s.Entities[slot].Pos
		for range 30 {
			s.Enqueue(slot, []sim.Input{{Seq: s.Players[slot].LastSeq + 1, DX: d[0], DY: d[1]}})
			s.Step()
		}
		p1 := s.Entities[slot].Pos
		dx, dy := int64(p1.X-p0.X), int64(p1.Y-p0.Y)
		dist2 := dx*dx + dy*dy
		// 5 units/s = 80 quanta, less at most a quantum per axis (steps round down).
		if dist2 > 80*80 || dist2 < 78*78 {
			t.Errorf("direction %v: moved (%d, %d) in one second, want length 80", d, dx, dy)
		}
	}
}

func TestInputQueueIgnoresOldAndDuplicateSeq(t *testing.T) {
	s, _ := sim.New(emptyWorld(100000, 100000), sim.Options{})
	slot, _ := s.AddPlayer(sim.PlayerState{Pos: sim.Vec{X: 8000, Y: 8000}, LastSeq: 10})
	if n := s.Enqueue(slot, []sim.Input{{Seq: 9, DX: 1}, {Seq: 10, DX: 1}, {Seq: 11, DX: 1}, {Seq: 11, DX: 1}, {Seq: 12, DX: 1, DY: -128}, {Seq: 13, DX: 1}}); n != 2 {
		t.Fatalf("accepted %d inputs, want 2 (seq 11 and 13)", n)
	}
	if n := s.Enqueue(slot, []sim.Input{{Seq: 13, DX: 1}}); n != 0 {
		t.Fatal("a resent seq was accepted")
	}
	s.Step()
	s.Step()
	if got := s.Players[slot].LastSeq; got != 13 {
		t.Fatalf("last seq %d, want 13", got)
	}
	p := s.Entities[slot].Pos
	s.Step() // nothing queued: the player stands
	if s.Entities[slot].Pos != p {
		t.Fatal("a player without inputs moved")
	}
	if s.Enqueue(99, []sim.Input{{Seq: 20}}) != 0 {
		t.Fatal("inputs for an empty slot accepted")
	}
}

func TestBoundsAndColliders(t *testing.T) {
	w := emptyWorld(10000, 10000) // 100 x 100 units
	w.Colliders = []mapgen.Collider{
		{Shape: mapgen.ShapeBox, X: 5000, Y: 5000, HalfX: 100, HalfY: 2000},
		{Shape: mapgen.ShapeCircle, X: 2000, Y: 8000, HalfX: 300, HalfY: 300},
	}
	s, _ := sim.New(w, sim.Options{})
	slot, _ := s.AddPlayer(sim.PlayerState{Pos: sim.Vec{X: 40 * 16, Y: 50 * 16}})
	walk := func(dx, dy int8, ticks int) {
		for range ticks {
			s.Enqueue(slot, []sim.Input{{Seq: s.Players[slot].LastSeq + 1, DX: dx, DY: dy}})
			s.Step()
		}
	}
	walk(1, 0, 300) // east into the wall at x = 49 units
	if x := s.Entities[slot].Pos.X; x > 49*16-sim.BodyRadius || x < 49*16-sim.BodyRadius-3 {
		t.Fatalf("stopped at x=%d, want just before %d", x, 49*16-sim.BodyRadius)
	}
	walk(1, 1, 900) // slides north along the wall, then east past it, into the corner
	p := s.Entities[slot].Pos
	if p.X != 100*16-sim.BodyRadius || p.Y != 100*16-sim.BodyRadius {
		t.Fatalf("ended at %+v, want the north-east corner", p)
	}
	if !s.Colliders().Blocked(sim.Vec{X: 20 * 16, Y: 80 * 16}) || s.Colliders().Blocked(sim.Vec{X: 30 * 16, Y: 30 * 16}) {
		t.Fatal("Blocked disagrees with the colliders")
	}
}

func TestNPCsWanderDeterministically(t *testing.T) {
	cfg, w := defaultWorld(t)
	n := sim.NPCCount(cfg.GenerationRules, w)
	if n != 400 { // 100 per km² on 4 km²
		t.Fatalf("NPCCount = %d, want 400", n)
	}
	run := func() []sim.Entity {
		s, err := sim.New(w, sim.Options{Seed: 7, NPCs: n})
		if err != nil {
			t.Fatal(err)
		}
		for range 300 {
			s.Step()
		}
		return append([]sim.Entity(nil), s.Entities...)
	}
	a, b := run(), run()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("NPC %d differs between two runs: %+v, %+v", i, a[i], b[i])
		}
	}
	s, _ := sim.New(w, sim.Options{Seed: 7, NPCs: n})
	start := append([]sim.Entity(nil), s.Entities...)
	turns, moved := 0, 0
	for range 30 * 10 {
		prev := append([]sim.Entity(nil), s.Entities...)
		s.Step()
		for i, e := range s.Entities {
			if e.DX != prev[i].DX || e.DY != prev[i].DY {
				turns++
			}
		}
	}
	for i, e := range s.Entities {
		if e.Pos != start[i].Pos {
			moved++
		}
		if s.Colliders().Blocked(e.Pos) && !s.Colliders().Blocked(start[i].Pos) {
			t.Fatalf("NPC %d walked into a collider at %+v", i, e.Pos)
		}
	}
	// About one turn every 2 s: 10 s x 400 NPCs ≈ 2,000 turns, more when blocked.
	if turns < 1400 || moved < 360 {
		t.Fatalf("%d turns and %d NPCs moved in 10 s", turns, moved)
	}
}

func TestPortalEventOncePerEntry(t *testing.T) {
	_, w := defaultWorld(t)
	s, _ := sim.New(w, sim.Options{})
	pt := w.Portals[0]
	at := sim.Vec{X: sim.FromCentimetres(pt.X), Y: sim.FromCentimetres(pt.Y - pt.Radius - 200)}
	slot, id := s.AddPlayer(sim.PlayerState{Pos: at})
	var events []sim.PortalEvent
	for i := range 60 {
		s.Enqueue(slot, []sim.Input{{Seq: uint64(i + 1), DY: 1}})
		ev := s.Step()
		events = append(events, ev.Portals...)
	}
	if len(events) != 1 || events[0].Slot != slot || events[0].ID != id || events[0].Portal != 0 {
		t.Fatalf("events %+v, want one entry into portal 0", events)
	}
}

func TestRemovePlayerReusesSlot(t *testing.T) {
	s, _ := sim.New(emptyWorld(100000, 100000), sim.Options{NPCs: 2})
	a, ida := s.AddPlayer(sim.PlayerState{Pos: sim.Vec{X: 100, Y: 100}, LastSeq: 4})
	st, ok := s.RemovePlayer(a)
	if !ok || st.LastSeq != 4 || st.Pos != (sim.Vec{X: 100, Y: 100}) || s.PlayerCount() != 0 {
		t.Fatalf("removed %+v %v", st, ok)
	}
	if _, ok := s.RemovePlayer(a); ok {
		t.Fatal("removed twice")
	}
	b, idb := s.AddPlayer(sim.PlayerState{})
	if b != a || idb == ida {
		t.Fatalf("slot %d id %d after slot %d id %d: want the slot reused with a new id", b, idb, a, ida)
	}
	if p := s.Entities[b].Pos; p.X < sim.BodyRadius || p.Y < sim.BodyRadius {
		t.Fatalf("position %+v not clamped into the bounds", p)
	}
}

// TestPortalArrivalDoesNotBounce: a player added on a portal (arriving through it) is
// not sent straight back; after it walks out, walking in again is reported.
func TestPortalArrivalDoesNotBounce(t *testing.T) {
	_, w := defaultWorld(t)
	s, _ := sim.New(w, sim.Options{})
	pt := w.Portals[0]
	slot, _ := s.AddPlayer(sim.PlayerState{Pos: sim.Vec{X: sim.FromCentimetres(pt.X), Y: sim.FromCentimetres(pt.Y)}})
	count := 0
	seq := uint64(0)
	walk := func(dy int8, ticks int) {
		for range ticks {
			seq++
			s.Enqueue(slot, []sim.Input{{Seq: seq, DY: dy}})
			count += len(s.Step().Portals)
		}
	}
	walk(0, 10)
	if count != 0 {
		t.Fatal("a player arriving on a portal was reported entering it")
	}
	walk(-1, 60) // 10 units south, out of the 3-unit trigger
	walk(1, 60)
	if count != 1 {
		t.Fatalf("%d portal events after walking out and back in, want 1", count)
	}
}
