package sim_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mapyard/mapyard/mapserver/sim"
)

// TestPredictionMatchesServer walks a player's inputs through Walk, as the browser
// predicts, and checks it lands exactly where the server's Steps put it, although the
// server receives them in bursts and walks them on its own ticks.
func TestPredictionMatchesServer(t *testing.T) {
	_, w := defaultWorld(t)
	s, _ := sim.New(w, sim.Options{})
	start := s.SpawnPoint(0)
	slot, _ := s.AddPlayer(sim.PlayerState{Pos: start})
	c := sim.NewColliders(w)
	pred, st := s.Entities[slot].Pos, sim.Stride{}
	dirs := []sim.Input{{DX: 1}, {DX: 1, DY: 1}, {DY: -1}, {DX: -90, DY: 33}, {}}
	var batch []sim.Input
	for i := range 900 {
		in := dirs[(i/37)%len(dirs)]
		in.Seq = uint64(i + 1)
		batch = append(batch, in)
		if i%3 == 2 { // a batch of three every third tick: jitter, within the buffer
			s.Enqueue(slot, batch)
			batch = batch[:0]
		}
		s.Step()
		pred, st = sim.Walk(c, pred, st, in, sim.DefaultPlayerSpeed, sim.DefaultTickHz)
	}
	for range 10 {
		s.Step()
	}
	if got := s.Players[slot].LastSeq; got != 900 {
		t.Fatalf("last seq %d, want 900", got)
	}
	if got := s.Entities[slot].Pos; got != pred {
		t.Fatalf("server at %+v, prediction at %+v", got, pred)
	}
	if got := s.Players[slot].Stride; got != st {
		t.Fatalf("server stride %+v, prediction %+v", got, st)
	}
	if d := s.Counters().InputsDropped; d != 0 {
		t.Fatalf("%d inputs dropped from a client within the jitter buffer", d)
	}
}

// TestRunNeverOutrunsSpeed: a straight run of n steps covers floor(n·v) exactly, so no
// run, however long or short, gets ahead of the exact speed, and opposite directions
// mirror each other.
func TestRunNeverOutrunsSpeed(t *testing.T) {
	for _, d := range [][2]int8{{1, 0}, {-1, 0}, {1, 1}, {-5, 3}, {127, -127}, {127, 1}} {
		vx, vy := sim.Velocity(d[0], d[1], sim.DefaultPlayerSpeed)
		var sx, sy int64
		for n := range uint64(30 * 256) {
			sx += int64(sim.Displacement(vx, n, 30))
			sy += int64(sim.Displacement(vy, n, 30))
			if ex := abs(vx) * int64(n+1) / (30 * 256); abs(sx) != ex {
				t.Fatalf("direction %v: %d steps cover %d quanta, want floor %d", d, n+1, abs(sx), ex)
			}
		}
		if sx != vx || sy != vy {
			t.Errorf("direction %v: %d, %d quanta/256 s over 256 s, want %d, %d", d, sx, sy, vx, vy)
		}
		if rx, ry := sim.Velocity(-d[0], -d[1], sim.DefaultPlayerSpeed); rx != -vx || ry != -vy {
			t.Errorf("direction %v: velocity not mirrored", d)
		}
		if sim.Displacement(-vx, 7, 30) != -sim.Displacement(vx, 7, 30) {
			t.Errorf("direction %v: displacement not mirrored", d)
		}
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// TestNoClientOutrunsSpeed is the speed property: over random input streams (bursts,
// gaps, floods, duplicates, replays, any seqs and directions) no player ever covers
// more than the documented speed allows over any window of 3 to 60 ticks, give or take
// one tick of slack.
func TestNoClientOutrunsSpeed(t *testing.T) {
	const hz, ticks = sim.DefaultTickHz, 1200
	perTick := float64(sim.DefaultPlayerSpeed) / hz
	for trial := range 40 {
		rng := rand.New(rand.NewPCG(uint64(trial), 99))
		s, err := sim.New(emptyWorld(200000, 200000), sim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		slot, _ := s.AddPlayer(sim.PlayerState{Pos: sim.Vec{X: 16000, Y: 16000}})
		var seq uint64
		path := make([]sim.Vec, 0, ticks+1)
		path = append(path, s.Entities[slot].Pos)
		dir := [2]int8{1, 0}
		for range ticks {
			if rng.IntN(10) == 0 {
				dir = [2]int8{int8(rng.IntN(255) - 127), int8(rng.IntN(255) - 127)}
			}
			var batch []sim.Input
			switch k := rng.IntN(6); k {
			case 0: // a flood
				for range 32 + rng.IntN(200) {
					seq += 1 + uint64(rng.IntN(3))
					batch = append(batch, sim.Input{Seq: seq, DX: dir[0], DY: dir[1]})
				}
			case 1: // a gap
			case 2: // duplicates and replays of old seqs
				batch = append(batch, sim.Input{Seq: seq, DX: dir[0], DY: dir[1]}, sim.Input{Seq: max(seq, 3) - 2, DX: dir[0], DY: dir[1]})
			default: // a few, with seqs chosen freely
				for range 1 + rng.IntN(4) {
					seq += 1 + uint64(rng.IntN(1000))
					batch = append(batch, sim.Input{Seq: seq, DX: dir[0], DY: dir[1]})
				}
			}
			s.Enqueue(slot, batch)
			s.Step()
			path = append(path, s.Entities[slot].Pos)
		}
		for i := range path {
			for k := 3; k <= 60 && i+k < len(path); k++ {
				dx, dy := float64(path[i+k].X-path[i].X), float64(path[i+k].Y-path[i].Y)
				if got, limit := math.Hypot(dx, dy), perTick*float64(k+1); got > limit {
					t.Fatalf("trial %d: moved %.1f quanta in %d ticks from tick %d, limit %.1f", trial, got, k, i, limit)
				}
			}
		}
		if s.Counters().InputsDropped == 0 {
			t.Fatalf("trial %d: floods dropped no input", trial)
		}
	}
}

// TestSeqsDoNotChangeThePath: the same directions numbered differently walk the same
// path; a client cannot pick seqs that step further.
func TestSeqsDoNotChangeThePath(t *testing.T) {
	walk := func(number func(i int) uint64) []sim.Vec {
		s, _ := sim.New(emptyWorld(200000, 200000), sim.Options{})
		slot, _ := s.AddPlayer(sim.PlayerState{Pos: sim.Vec{X: 16000, Y: 16000}})
		var out []sim.Vec
		for i := range 300 {
			s.Enqueue(slot, []sim.Input{{Seq: number(i), DX: int8(100 - i%7), DY: int8(i / 50)}})
			s.Step()
			out = append(out, s.Entities[slot].Pos)
		}
		return out
	}
	a := walk(func(i int) uint64 { return uint64(i + 1) })
	b := walk(func(i int) uint64 { return uint64(i)*7919 + 5 })
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("tick %d: %+v with seqs 1, 2, 3…, %+v with other seqs", i, a[i], b[i])
		}
	}
}

// TestReconcile: a client that takes the server's position at the acked seq, the
// stride its own inputs up to that seq give, and replays its unacknowledged inputs
// predicts where the server will be once it walks them.
func TestReconcile(t *testing.T) {
	_, w := defaultWorld(t)
	s, _ := sim.New(w, sim.Options{DrainWindow: 10000}) // no shedding: prediction exact
	slot, _ := s.AddPlayer(sim.PlayerState{Pos: s.SpawnPoint(1)})
	c := sim.NewColliders(w)
	var sent []sim.Input
	for i := range 120 {
		sent = append(sent, sim.Input{Seq: uint64(i + 1), DX: int8(i/20%3 - 1), DY: int8(i/45%3 - 1)})
	}
	for i := range 60 {
		s.Enqueue(slot, sent[i:i+1])
		if i%10 != 9 { // late ticks: six inputs wait, within the jitter buffer
			s.Step()
		}
	}
	acked := s.Players[slot].LastSeq
	if acked == 0 || acked >= 60 {
		t.Fatalf("acked %d: want some of the 60 sent inputs still pending", acked)
	}
	pred, _ := sim.Replay(c, s.Entities[slot].Pos, sim.StrideAfter(sent[:acked]), sent[acked:], sim.DefaultPlayerSpeed, sim.DefaultTickHz)
	for i := 60; i < 120; i++ {
		s.Enqueue(slot, sent[i:i+1])
		s.Step()
	}
	for range 20 {
		s.Step()
	}
	if got := s.Entities[slot].Pos; got != pred {
		t.Fatalf("acked %d: replay predicts %+v, server at %+v", acked, pred, got)
	}
}

// TestJitterBufferWalksLateInputsLater: inputs that arrive in a burst are walked one
// per tick, later; a burst past the buffer loses its oldest inputs; a standing delay
// is shed at the end of the drain window.
func TestJitterBufferWalksLateInputsLater(t *testing.T) {
	s, _ := sim.New(emptyWorld(200000, 200000), sim.Options{JitterBuffer: 8, DrainWindow: 30})
	slot, _ := s.AddPlayer(sim.PlayerState{Pos: sim.Vec{X: 16000, Y: 16000}})
	burst := func(from, n int) []sim.Input {
		var in []sim.Input
		for i := range n {
			in = append(in, sim.Input{Seq: uint64(from + i), DX: 1})
		}
		return in
	}
	s.Enqueue(slot, burst(1, 5))
	s.Step()
	if got := s.Players[slot].LastSeq; got != 1 {
		t.Fatalf("after one tick of a burst of 5: acked %d, want 1 (one input a tick)", got)
	}
	s.Enqueue(slot, burst(6, 20)) // 24 waiting: the 16 oldest go
	if got, want := s.Counters().InputsDropped, uint64(16); got != want {
		t.Fatalf("dropped %d, want %d", got, want)
	}
	if got := s.Players[slot].LastSeq; got != 17 {
		t.Fatalf("acked %d after the overflow, want 17 (the dropped ones count as done)", got)
	}
	// A steady client one input a tick behind a standing queue of 8: each window sheds
	// one of them, until at most one waits.
	seq := 26
	for range 30 * 9 {
		s.Enqueue(slot, burst(seq, 1))
		seq++
		s.Step()
	}
	if got := uint64(seq-1) - s.Players[slot].LastSeq; got > 1 {
		t.Fatalf("%d inputs still wait after nine drain windows, want at most 1", got)
	}
}

// TestNewSessionWalksFromSeqOne: a takeover starts a fresh sequence; the old one's
// count no longer holds the new inputs back.
func TestNewSessionWalksFromSeqOne(t *testing.T) {
	s, _ := sim.New(emptyWorld(200000, 200000), sim.Options{})
	slot, _ := s.AddPlayer(sim.PlayerState{Pos: sim.Vec{X: 16000, Y: 16000}})
	for i := range 50 {
		s.Enqueue(slot, []sim.Input{{Seq: uint64(i + 1), DX: 1}})
		s.Step()
	}
	s.NewSession(slot)
	p := s.Entities[slot].Pos
	s.Enqueue(slot, []sim.Input{{Seq: 1, DY: 1}})
	s.Step()
	if s.Entities[slot].Pos == p || s.Players[slot].LastSeq != 1 {
		t.Fatalf("the new session's input 1 did not walk: at %+v (was %+v), acked %d", s.Entities[slot].Pos, p, s.Players[slot].LastSeq)
	}
}

// TestFrozenStandsStill: a frozen player (portal transfer in flight) consumes its
// inputs without walking and walks again once released.
func TestFrozenStandsStill(t *testing.T) {
	s, _ := sim.New(emptyWorld(200000, 200000), sim.Options{})
	slot, _ := s.AddPlayer(sim.PlayerState{Pos: sim.Vec{X: 16000, Y: 16000}})
	s.Enqueue(slot, []sim.Input{{Seq: 1, DX: 1}, {Seq: 2, DX: 1}, {Seq: 3, DX: 1}})
	s.Step()
	s.Freeze(slot, true)
	p := s.Entities[slot].Pos
	for i := range 10 {
		s.Enqueue(slot, []sim.Input{{Seq: uint64(4 + i), DX: 1}})
		s.Step()
	}
	if s.Entities[slot].Pos != p {
		t.Fatalf("a frozen player moved from %+v to %+v", p, s.Entities[slot].Pos)
	}
	if got := s.Players[slot].LastSeq; got != 13 {
		t.Fatalf("acked %d while frozen, want 13 (consumed)", got)
	}
	s.Freeze(slot, false)
	s.Enqueue(slot, []sim.Input{{Seq: 14, DX: 1}})
	s.Step()
	if s.Entities[slot].Pos == p {
		t.Fatal("a released player does not walk")
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

func TestScaledSpeed(t *testing.T) {
	for _, tc := range []struct{ speed, permille, want int32 }{
		{80, 1000, 80}, {80, 694, 55}, {80, 555, 44}, {80, 250, 20}, {80, 0, 1}, {1, 10, 1}, {80, 1200, 80},
	} {
		if got := sim.ScaledSpeed(tc.speed, tc.permille); got != tc.want {
			t.Errorf("ScaledSpeed(%d, %d) = %d, want %d", tc.speed, tc.permille, got, tc.want)
		}
	}
}

// TestSnapshotRateBatchesDropNothing: a client that makes an input every tick and sends
// what it gathered once per snapshot received (every second tick at 30 and 15 Hz; when
// snapshots stop, its idle rule sends as often), each batch arriving up to two ticks
// late, has every input walked, none dropped, and ends where its prediction does.
func TestSnapshotRateBatchesDropNothing(t *testing.T) {
	_, w := defaultWorld(t)
	s, _ := sim.New(w, sim.Options{})
	slot, _ := s.AddPlayer(sim.PlayerState{Pos: s.SpawnPoint(0)})
	c := sim.NewColliders(w)
	pred, st := s.Entities[slot].Pos, sim.Stride{}
	r := rand.New(rand.NewPCG(3, 4))
	dirs := []sim.Input{{DX: 127}, {DX: 90, DY: 90}, {DY: -127}, {DX: -127, DY: 20}}
	type batch struct {
		at     int
		inputs []sim.Input
	}
	var gathered []sim.Input
	var inFlight []batch
	const ticks = 30 * 60
	lastArrival := 0
	for tick := range ticks {
		in := dirs[(tick/31)%len(dirs)]
		in.Seq = uint64(tick + 1)
		gathered = append(gathered, in)
		pred, st = sim.Walk(c, pred, st, in, sim.DefaultPlayerSpeed, sim.DefaultTickHz)
		if tick%2 == 1 {
			// TCP keeps the order: a batch never arrives before the one sent earlier.
			lastArrival = max(lastArrival, tick+1+r.IntN(3))
			inFlight = append(inFlight, batch{at: lastArrival, inputs: gathered})
			gathered = nil
		}
		for len(inFlight) > 0 && inFlight[0].at <= tick {
			s.Enqueue(slot, inFlight[0].inputs)
			inFlight = inFlight[1:]
		}
		s.Step()
	}
	for _, b := range inFlight {
		s.Enqueue(slot, b.inputs)
	}
	s.Enqueue(slot, gathered)
	for range 40 {
		s.Step()
	}
	if d := s.Counters().InputsDropped; d != 0 {
		t.Fatalf("%d inputs dropped", d)
	}
	if got := s.Players[slot].LastSeq; got != ticks {
		t.Fatalf("last seq %d, want %d", got, ticks)
	}
	if got := s.Entities[slot].Pos; got != pred {
		t.Fatalf("server at %+v, prediction at %+v", got, pred)
	}
}
