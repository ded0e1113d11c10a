package sim_test

import (
	"testing"

	"github.com/mapyard/mapyard/mapserver/sim"
)

// TestPredictionMatchesServer replays a player's inputs through Move, as the browser
// predicts, and checks it lands exactly where the server's Step put it.
func TestPredictionMatchesServer(t *testing.T) {
	_, w := defaultWorld(t)
	s, _ := sim.New(w, sim.Options{})
	start := s.SpawnPoint(0)
	slot, _ := s.AddPlayer(sim.PlayerState{Pos: start})
	c := sim.NewColliders(w)
	pred := start
	dirs := []sim.Input{{DX: 1}, {DX: 1, DY: 1}, {DY: -1}, {DX: -90, DY: 33}, {}}
	for i := range 900 {
		in := dirs[(i/37)%len(dirs)]
		in.Seq = uint64(i + 1)
		s.Enqueue(slot, []sim.Input{in})
		if i%3 != 0 {
			s.Step() // the server runs inputs on its own ticks, sometimes in bursts
		}
		pred = sim.Move(c, pred, in, sim.DefaultPlayerSpeed, sim.DefaultTickHz)
	}
	for range 900 {
		s.Step()
	}
	if s.Players[slot].LastSeq != 900 {
		t.Fatalf("last seq %d, want 900", s.Players[slot].LastSeq)
	}
	if got := s.Entities[slot].Pos; got != pred {
		t.Fatalf("server at %+v, prediction at %+v", got, pred)
	}
}

func TestDisplacementSumsToVelocity(t *testing.T) {
	for _, d := range [][2]int8{{1, 0}, {-1, 0}, {1, 1}, {-5, 3}, {127, -127}} {
		vx, vy := sim.Velocity(d[0], d[1], sim.DefaultPlayerSpeed)
		var sx, sy int64
		for p := range uint64(30 * 256) {
			sx += int64(sim.Displacement(vx, p+12345, 30))
			sy += int64(sim.Displacement(vy, p+12345, 30))
		}
		if sx != vx || sy != vy {
			t.Errorf("direction %v: %d, %d quanta/256 s over 256 s, want %d, %d", d, sx, sy, vx, vy)
		}
		if rx, ry := sim.Velocity(-d[0], -d[1], sim.DefaultPlayerSpeed); rx != -vx || ry != -vy {
			t.Errorf("direction %v: velocity not mirrored", d)
		}
	}
}

func TestCentimetres(t *testing.T) {
	for _, cm := range []int32{0, 6, 7, 100, 199999, -7} {
		q := sim.FromCentimetres(cm)
		if back := sim.ToCentimetres(q); back-cm > 4 || cm-back > 4 {
			t.Errorf("%d cm -> %d q -> %d cm", cm, q, back)
		}
	}
}

// TestReconcile: a client that takes the server's position at the acked seq and
// replays its unacknowledged inputs predicts where the server will be once it applies
// them.
func TestReconcile(t *testing.T) {
	_, w := defaultWorld(t)
	s, _ := sim.New(w, sim.Options{MaxQueue: 128})
	slot, _ := s.AddPlayer(sim.PlayerState{Pos: s.SpawnPoint(1)})
	c := sim.NewColliders(w)
	var sent []sim.Input
	for i := range 120 {
		sent = append(sent, sim.Input{Seq: uint64(i + 1), DX: int8(i/20%3 - 1), DY: int8(i/45%3 - 1)})
	}
	s.Enqueue(slot, sent[:60])
	for range 15 {
		s.Step()
	}
	acked := s.Players[slot].LastSeq
	if acked == 0 || acked >= 60 {
		t.Fatalf("acked %d after 15 ticks: want some of the 60 queued inputs still pending", acked)
	}
	pending := sent[acked:]
	pred := sim.Replay(c, s.Entities[slot].Pos, pending, sim.DefaultPlayerSpeed, sim.DefaultTickHz)
	if n := s.Enqueue(slot, sent[60:]); n != 60 {
		t.Fatalf("queued %d of 60 inputs", n)
	}
	for range 60 {
		s.Step()
	}
	if got := s.Entities[slot].Pos; got != pred {
		t.Fatalf("acked %d: replay predicts %+v, server at %+v", acked, pred, got)
	}
}
