package game_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// TestGame_FarEntitiesMoveLessOften: an idle player sees a player walking beyond the
// far radius move once every wire.DefaultFarEvery snapshots and one walking within it
// move on every snapshot; once the far player is its trade partner, it sees every move
// of it too.
func TestGame_FarEntitiesMoveLessOften(t *testing.T) {
	g, _ := mustNewGame(t)
	s := g.Sim()
	// A radius under the 4 units a trade reaches, so that a far player can trade.
	g.SetFarRadius(5 * sim.QuantaPerUnit / 2)
	if fv := g.FarView(); fv == nil || fv.Radius != 2.5 || fv.Every != wire.DefaultFarEvery {
		t.Fatalf("welcomes would announce %+v, want radius 2.5 every %d", fv, wire.DefaultFarEvery)
	}
	at := clearSpot(t, s, 10)
	place := func(id string, dx float64) {
		t.Helper()
		x := float64(at.X)/sim.QuantaPerUnit + dx
		if err := join(g, id, &record.CharacterState{MapID: mapgen.DefaultMapID, X: x, Y: float64(at.Y) / sim.QuantaPerUnit}); err != nil {
			t.Fatal(err)
		}
	}
	place("me", 0)
	place("near", 1.2)
	place("far", 3.2)
	nearSlot, _ := g.Slot("near")
	farSlot, _ := g.Slot("far")
	view, dec := view(g, "me"), wire.NewDecoder(0)
	tick := 0
	// moves runs n snapshots with both walkers walking circles of 0.27 units' radius,
	// one every 10 ticks (so no two consecutive snapshots, nor two samples of a far
	// one, find a walker in the same place), each keeping to its side of the radius,
	// and counts the snapshots on which each one's position differs from the one
	// before.
	moves := func(n int) (nearMoves, farMoves int) {
		t.Helper()
		var last map[int32][2]int32
		for range n {
			walkCircles(t, g, &tick, "near", "far")
			frame, _ := view.Snapshot(nil)
			snap, err := dec.Decode(frame)
			if err != nil {
				t.Fatal(err)
			}
			view.Ack(uint64(snap.Tick))
			now := map[int32][2]int32{}
			for _, sl := range []int32{nearSlot, farSlot} {
				e := snap.Find(sl)
				if e == nil {
					t.Fatalf("slot %d left out of the view", sl)
				}
				now[sl] = [2]int32{e.X, e.Y}
			}
			if last != nil {
				if now[nearSlot] != last[nearSlot] {
					nearMoves++
				}
				if now[farSlot] != last[farSlot] {
					farMoves++
				}
			}
			last = now
		}
		return nearMoves, farMoves
	}
	moves(4) // past the full snapshot
	const n = 60
	nearMoves, farMoves := moves(n + 1)
	if nearMoves != n {
		t.Fatalf("the near walker moved on %d of %d snapshots, want every one", nearMoves, n)
	}
	if want := n / wire.DefaultFarEvery; farMoves < want-1 || farMoves > want+1 {
		t.Fatalf("the far walker moved on %d of %d snapshots, want about %d", farMoves, n, want)
	}

	// A trade partner is near whatever its distance.
	offerSword(t, g, "me", "far")
	moves(wire.DefaultFarEvery) // until the partner's sampled state is its current one
	if _, farMoves = moves(n + 1); farMoves != n {
		t.Fatalf("the far trade partner moved on %d of %d snapshots, want every one", farMoves, n)
	}
}

// TestGame_CrowdSeesTheNearestNear: in a view of more entities than the view's near
// count, all inside the far radius, an idle player sees the nearest walkers move on
// every snapshot and the others once every wire.DefaultFarEvery snapshots; welcomes
// announce the count. With the count at 0, every walker inside the radius is near.
func TestGame_CrowdSeesTheNearestNear(t *testing.T) {
	g, _ := mustNewGameWith(t, func(c *mapgen.MapConfig) { c.GenerationRules.NPCDensity = 0 }) // the walkers are the whole crowd
	const nearCount, walkers = 4, 8
	g.SetViewNear(nearCount)
	if fv := g.FarView(); fv == nil || fv.Nearest != nearCount {
		t.Fatalf("welcomes would announce %+v, want nearest %d", fv, nearCount)
	}
	s := g.Sim()
	at := clearSpot(t, s, walkers+2)
	var slots []int32
	for i := range walkers + 1 { // "w0" is the player who watches, the others walk
		x := float64(at.X)/sim.QuantaPerUnit + float64(i)
		id := fmt.Sprintf("w%d", i)
		if err := join(g, id, &record.CharacterState{MapID: mapgen.DefaultMapID, X: x, Y: float64(at.Y) / sim.QuantaPerUnit}); err != nil {
			t.Fatal(err)
		}
		sl, _ := g.Slot(id)
		slots = append(slots, sl)
	}
	var walkerIDs []string
	for i := 1; i <= walkers; i++ {
		walkerIDs = append(walkerIDs, fmt.Sprintf("w%d", i))
	}
	v, dec := view(g, "w0"), wire.NewDecoder(0)
	tick := 0
	// moves runs n snapshots with every walker walking a circle of 0.27 units (so no
	// two consecutive snapshots find one in the same place, and none leaves its rank)
	// and counts, per walker, the snapshots where its position differs from the one
	// before.
	moves := func(n int) []int {
		t.Helper()
		counts := make([]int, walkers+1)
		var last []wire.Entity
		for range n {
			walkCircles(t, g, &tick, walkerIDs...)
			frame, _ := v.Snapshot(nil)
			snap, err := dec.Decode(frame)
			if err != nil {
				t.Fatal(err)
			}
			v.Ack(uint64(snap.Tick))
			now := make([]wire.Entity, walkers+1)
			for i, sl := range slots {
				e := snap.Find(sl)
				if e == nil {
					t.Fatalf("walker %d left out of the view", i)
				}
				now[i] = *e
			}
			if last != nil {
				for i := range now {
					if now[i].X != last[i].X || now[i].Y != last[i].Y {
						counts[i]++
					}
				}
			}
			last = now
		}
		return counts
	}
	const n = 48
	moves(2 * wire.DefaultFarEvery) // past the full snapshot and the first selection
	counts := moves(n + 1)
	for i := 1; i <= walkers; i++ {
		switch want := n / wire.DefaultFarEvery; {
		case i < nearCount && counts[i] != n:
			t.Errorf("walker %d, among the %d nearest, moved on %d of %d snapshots, want every one", i, nearCount, counts[i], n)
		case i >= nearCount && (counts[i] < want-1 || counts[i] > want+1):
			t.Errorf("walker %d, beyond the %d nearest, moved on %d of %d snapshots, want about %d", i, nearCount, counts[i], n, want)
		}
	}

	g.SetViewNear(0)
	moves(2 * wire.DefaultFarEvery)
	for i, c := range moves(n + 1)[1:] {
		if c != n {
			t.Errorf("with no near count, walker %d moved on %d of %d snapshots, want every one", i+1, c, n)
		}
	}
}

// walkCircles runs two ticks (one snapshot interval) with every player of ids walking a
// circle of 0.27 units' radius, one every 10 ticks, counting the ticks in *tick: no two
// consecutive snapshots, nor two samples of a far one, find a walker in the same place.
func walkCircles(t *testing.T, g *game.Game, tick *int, ids ...string) {
	t.Helper()
	for range 2 {
		*tick++
		a := 2 * math.Pi * float64(*tick%10) / 10
		in := sim.Input{Seq: uint64(*tick), DX: int8(math.Round(127 * math.Cos(a))), DY: int8(math.Round(127 * math.Sin(a)))}
		for _, id := range ids {
			if err := refused(g, id, []sim.Input{in}); err != nil {
				t.Fatal(err)
			}
		}
		step(g)
	}
}
