package game_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

func TestArrivalPoint(t *testing.T) {
	cfg, err := mapgen.Template("frontier")
	if err != nil {
		t.Fatal(err)
	}
	w, err := mapgen.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("FromAnotherMapBesideItsPortal", func(t *testing.T) {
		a := game.ArrivalPoint(w, "frontier", &record.CharacterState{MapID: "default", X: 1, Y: 1})
		var back mapgen.Portal
		for _, p := range w.Portals {
			if p.TargetMapID == "default" {
				back = p
			}
		}
		d := math.Hypot(a.X*100-float64(back.X), a.Y*100-float64(back.Y))
		if a.Via != "portal" || d <= float64(back.Radius) || d > float64(back.Radius+game.ArrivalClearance)+1 {
			t.Fatalf("arrival %+v is %.0f cm from the portal back (radius %d)", a, d, back.Radius)
		}
	})
	t.Run("SavedOnThisMapKeepsPosition", func(t *testing.T) {
		a := game.ArrivalPoint(w, "frontier", &record.CharacterState{MapID: "frontier", X: 12.5, Y: 40})
		if a != (game.Arrival{X: 12.5, Y: 40, Via: "saved"}) {
			t.Fatalf("arrival %+v", a)
		}
	})
	t.Run("SavedInAPortalBesideIt", func(t *testing.T) {
		// The state a portal's unused transfer carried: standing in the portal. Put
		// back there, the portal would not take the character until it stepped out.
		if len(w.Portals) == 0 {
			t.Fatal("the frontier template has no portal")
		}
		for _, p := range w.Portals {
			a := game.ArrivalPoint(w, "frontier", &record.CharacterState{MapID: "frontier", X: float64(p.X)/100 + 0.3, Y: float64(p.Y) / 100})
			d := math.Hypot(a.X*100-float64(p.X), a.Y*100-float64(p.Y))
			if a.Via != "beside" || d <= float64(p.Radius) || d > float64(p.Radius+game.ArrivalClearance)+1 {
				t.Fatalf("saved in the portal to %s: arrival %+v is %.0f cm from it (radius %d)", p.TargetMapID, a, d, p.Radius)
			}
		}
	})
	t.Run("NeverSavedAtSpawn", func(t *testing.T) {
		a := game.ArrivalPoint(w, "frontier", nil)
		if s := w.Spawns[0]; a != (game.Arrival{X: float64(s.X) / 100, Y: float64(s.Y) / 100, Via: "spawn"}) {
			t.Fatalf("arrival %+v, want the first spawn point", a)
		}
	})
	t.Run("NewCharactersSpreadOverSpawnPoints", func(t *testing.T) {
		seen := map[game.Arrival]bool{}
		for i := 0; i < 200; i++ {
			a := game.ArrivalPointOf(w, "frontier", fmt.Sprintf("guest-%d", i), nil)
			if a.Via != "spawn" {
				t.Fatalf("arrival %+v, want spawn", a)
			}
			seen[a] = true
		}
		if len(seen) != len(w.Spawns) {
			t.Fatalf("200 new characters used %d of %d spawn points", len(seen), len(w.Spawns))
		}
		again := game.ArrivalPointOf(w, "frontier", "guest-7", nil)
		if again != game.ArrivalPointOf(w, "frontier", "guest-7", nil) {
			t.Fatal("a character's spawn point must not change between calls")
		}
	})
	t.Run("FromAMapWithoutPortalHereAtSpawn", func(t *testing.T) {
		if a := game.ArrivalPoint(w, "frontier", &record.CharacterState{MapID: "elsewhere"}); a.Via != "spawn" {
			t.Fatalf("arrival %+v, want spawn", a)
		}
	})
}
