package admission_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
)

// discoverPortal returns the target of the discovery portal of a map's generated world.
func discoverPortal(t *testing.T, c mapgen.MapConfig) mapgen.Portal {
	t.Helper()
	w, err := mapgen.Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range w.Portals {
		if p.TargetSeed != 0 {
			return p
		}
	}
	t.Fatalf("map %q has no discovery portal", c.MapID)
	return mapgen.Portal{}
}

// inFrontier joins a guest and moves it to frontier-1.
func inFrontier(t *testing.T, e *env) *mapcontract.RedeemResult {
	t.Helper()
	ctx := context.Background()
	a, err := e.svc.RequestTransfer(ctx, transferReq("tr-in", enter(t, e, ""), "default-1", "frontier", 1))
	if err != nil {
		t.Fatal(err)
	}
	in := e.redeem(t, "frontier-1", a.Token)
	if err := e.svc.TransferResult(ctx, mapcontract.TransferResult{TransferID: "tr-in", InstanceID: "frontier-1", Success: true}); err != nil {
		t.Fatal(err)
	}
	return in
}

func TestTransfer_Derived(t *testing.T) {
	ctx := context.Background()
	frontier, err := mapgen.Template("frontier")
	if err != nil {
		t.Fatal(err)
	}
	frontier.InstanceID = "frontier-1"
	portal := discoverPortal(t, frontier)

	t.Run("SpawnsFromParentConfig", func(t *testing.T) {
		e := newEnv(t)
		in := inFrontier(t, e)
		a, err := e.svc.RequestTransfer(ctx, transferReq("tr-w", in, "frontier-1", portal.TargetMapID, 3))
		if err != nil {
			t.Fatal(err)
		}
		want := mapgen.InstanceOfMap(portal.TargetMapID)
		if a.ToInstanceID != want || len(e.maps.created) != 1 || e.maps.created[0] != want {
			t.Fatalf("answer to %s, created %v; want %s", a.ToInstanceID, e.maps.created, want)
		}
		got, err := mapgen.Resolve(want, portal.TargetMapID, e.maps.configs[want])
		if err != nil {
			t.Fatalf("created config does not resolve: %v", err)
		}
		derived, err := mapgen.Derive(frontier, portal.TargetSeed)
		if err != nil {
			t.Fatal(err)
		}
		if got.Seed != derived.Seed || got.Terrain != derived.Terrain {
			t.Fatalf("created config %+v, want mapgen.Derive's %+v", got, derived)
		}

		t.Run("AndOnFromTheDerivedMap", func(t *testing.T) {
			// The derived instance's config is found in the wanted set, as the supervisor
			// stores it, and its own discovery portal leads further.
			if err := e.db.PutInstance(ctx, orchestrator.WantedInstance{ID: want, MapID: portal.TargetMapID,
				Config: e.maps.configs[want], Status: orchestrator.StatusRunning}); err != nil {
				t.Fatal(err)
			}
			next := discoverPortal(t, derived)
			in2 := e.redeem(t, want, a.Token)
			if _, err := e.svc.RequestTransfer(ctx, transferReq("tr-w2", in2, want, next.TargetMapID, 4)); err != nil {
				t.Fatal(err)
			}
			if n := len(e.maps.created); n != 2 || e.maps.created[1] != mapgen.InstanceOfMap(next.TargetMapID) {
				t.Fatalf("created %v", e.maps.created)
			}
		})
	})
	t.Run("RunsItsParentsImage", func(t *testing.T) {
		// A map discovered from a game's map is a map of that game, whatever image the
		// parent's record names; the config it is handed does not carry the image.
		e := newEnv(t)
		if err := e.db.PutInstance(ctx, orchestrator.WantedInstance{ID: "frontier-1", MapID: "frontier", Image: "studio/dungeon:1", Status: orchestrator.StatusRunning}); err != nil {
			t.Fatal(err)
		}
		in := inFrontier(t, e)
		if _, err := e.svc.RequestTransfer(ctx, transferReq("tr-w", in, "frontier-1", portal.TargetMapID, 3)); err != nil {
			t.Fatal(err)
		}
		want := mapgen.InstanceOfMap(portal.TargetMapID)
		if got := e.maps.images[want]; got != "studio/dungeon:1" {
			t.Fatalf("derived map created with image %q, want its parent's", got)
		}
		if strings.Contains(string(e.maps.configs[want]), `"image"`) {
			t.Fatalf("the derived map's config carries the image: %s", e.maps.configs[want])
		}
	})
	t.Run("ErrMapUnavailableNotAPortalOfTheSource", func(t *testing.T) {
		e := newEnv(t)
		in := inFrontier(t, e)
		_, err := e.svc.RequestTransfer(ctx, transferReq("tr-n", in, "frontier-1", mapgen.DerivedMapID("frontier", 42), 3))
		wantCode(t, err, apierr.EMAPUNAVAILABLE)
		if len(e.maps.created) != 0 {
			t.Fatalf("created %v", e.maps.created)
		}
	})
}
