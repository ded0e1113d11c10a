package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/control"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestOrchestrator_PortalTransfer plays portals end to end with the real orchestrator
// and real map containers, through the edge, with the Go client: a map whose one portal
// leads to a map that cannot be started denies the transfer and the player stays where
// it stands; its other portal leads to a derived map, which the orchestrator starts
// from the source's config through mapgen.Derive, and the player arrives there next to
// the portal back, carrying its state.
func TestOrchestrator_PortalTransfer(t *testing.T) {
	cli := dockertest.Client(t)
	deployment := "pt-" + randomHex(t, 4)
	t.Cleanup(func() { dockertest.RemoveDeployment(t, cli, deployment) })

	secret := randomHex(t, 16)
	dbPath := filepath.Join(t.TempDir(), "mapyard.db")
	child := startOrchestrator(t, childEnv(deployment, "127.0.0.1:0", dbPath, secret,
		"ORCH_DEFAULT_INSTANCE_ID="+deployment,
		"ORCH_CHECKPOINT_MS=200",
		"MAP_HEARTBEAT_MS=500",
		"MAP_SNAPSHOT_PUSH_MS=200",
	))
	waitStatus(t, child.public+"/readyz", http.StatusOK, 60*time.Second)
	// The test speaks for the default map on /orch/*, with that map's own credential.
	mapCred, _ := credentialsOf(t, inspect(t, cli, getInstance(t, child.control, secret, deployment).ContainerID), secret)

	// The source map: flat, without props or water, with a portal to a map nobody can
	// start and a portal to a map discovered from it. Its ids are this run's own, so
	// the derived map's id (and container name) is too.
	src, err := mapgen.Template(mapgen.DefaultMapID)
	if err != nil {
		t.Fatal(err)
	}
	src.MapID = deployment + "-src"
	src.InstanceID = mapgen.InstanceOfMap(src.MapID)
	src.Terrain.WaterLevel, src.StaticCollider.BlockWater = 0, false
	src.GenerationRules.PropDensity = 0
	nowhere := deployment + "-nowhere"
	src.GenerationRules.Portals = []mapgen.PortalRule{{TargetMapID: nowhere, Count: 1}, {Discover: true, Count: 1}}
	raw, err := json.Marshal(src)
	if err != nil {
		t.Fatal(err)
	}
	testutil.PostJSON(t, child.control+control.PathAdminMaps, secret,
		fmt.Sprintf(`{"instanceId":%q,"mapId":%q,"config":%s}`, src.InstanceID, src.MapID, raw), http.StatusCreated, nil)
	world, err := mapgen.Generate(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(world.Portals) != 2 || world.Portals[0].TargetMapID != nowhere || world.Portals[1].TargetSeed == 0 {
		t.Fatalf("source portals %+v", world.Portals)
	}
	// Players reach maps through the edge, which learns routes from the control listener.
	edge := openEdge(t, child.control, child.edgeCredential)
	base := "ws" + strings.TrimPrefix(edge.PublicURL(), "http")

	t.Run("DeniedStaysPut", func(t *testing.T) {
		p := world.Portals[0]
		c := enterBeside(t, child, mapCred, base, src, p, `{"gold":3}`)
		sx, sy := selfPosition(t, c)
		ev := walkUntil(t, c, "the refusal", func(e client.Event) bool { return e.Kind == "event" && e.Event.Name != "npc_state" })
		if ev.Event.Name != "transfer_denied" || ev.Event.Code != "map_unavailable" {
			t.Fatalf("event %+v, want transfer_denied map_unavailable", ev.Event)
		}
		// Still on the source map, still simulated where the walk took it: a few units
		// from where it started, inside the portal it could not take.
		if w := c.Welcome(); w.InstanceID != src.InstanceID {
			t.Fatalf("player moved to %s", w.InstanceID)
		}
		tick := c.State().Tick
		waitUntil(t, "snapshots after the refusal", func() bool { return c.State().Tick > tick+3 })
		x, y := selfPosition(t, c)
		if d := math.Hypot(x-sx, y-sy); d > 20 {
			t.Fatalf("player at (%.1f, %.1f), %.1f units from where it started", x, y, d)
		}
		if d := math.Hypot(x*100-float64(p.X), y*100-float64(p.Y)); d > float64(p.Radius)+100 {
			t.Fatalf("player at (%.1f, %.1f) is not at the portal it was refused", x, y)
		}
	})

	t.Run("ArrivesOnDerivedMapWithItsState", func(t *testing.T) {
		p := world.Portals[1]
		c := enterBeside(t, child, mapCred, base, src, p, `{"gold":12}`)
		character := c.Welcome().CharacterID
		ev := walkUntil(t, c, "the arrival", func(e client.Event) bool { return e.Kind == "welcome" && e.Welcome.MapID == p.TargetMapID })
		w := ev.Welcome
		if w.InstanceID != mapgen.InstanceOfMap(p.TargetMapID) || w.CharacterID != character || w.TransferID == "" {
			t.Fatalf("destination welcome %+v", w)
		}
		derived, err := mapgen.Derive(src, p.TargetSeed)
		if err != nil {
			t.Fatal(err)
		}
		if w.MapConfig.Seed != derived.Seed || w.MapConfig.Terrain != derived.Terrain {
			t.Fatalf("the derived map runs %+v, want mapgen.Derive's config", w.MapConfig)
		}
		dw, err := mapgen.Generate(derived)
		if err != nil {
			t.Fatal(err)
		}
		want := game.ArrivalPointOf(dw, derived.MapID, character, &control.CharacterState{MapID: src.MapID})
		if want.Via != "portal" {
			t.Fatalf("the derived map has no portal back: %+v", want)
		}
		waitUntil(t, "a snapshot of the derived map", func() bool { _, ok := c.State().SelfEntity(); return ok })
		if x, y := selfPosition(t, c); math.Abs(x-want.X) > 0.5 || math.Abs(y-want.Y) > 0.5 {
			t.Fatalf("arrived at (%.2f, %.2f), want beside the portal back at (%.2f, %.2f)", x, y, want.X, want.Y)
		}

		// The destination owns the character now: its pushes reach the store with the
		// attributes the character carried through both transfers.
		waitUntil(t, "the derived map's push", func() bool {
			st := savedState(t, dbPath, character)
			return st != nil && st.InstanceID == w.InstanceID
		})
		if st := savedState(t, dbPath, character); string(st.Attributes) != `{"gold":12}` || st.MapID != derived.MapID {
			t.Fatalf("saved state %+v, want map %s with {\"gold\":12}", st, derived.MapID)
		}
	})
}

// enterBeside joins a new saved character and moves it onto the source map, one unit
// west of portal p's trigger circle: the test redeems the join ticket in the default
// map's place (so no map pushes the character meanwhile) and asks for the transfer as
// that map would.
func enterBeside(t *testing.T, child *childOrchestrator, mapCred, base string, src mapgen.MapConfig, p mapgen.Portal, attrs string) *client.Client {
	t.Helper()
	return enterBesideAs(t, child, mapCred, base, src, p, attrs, fmt.Sprintf("P0rtal%sK3yAbCdEfGhIjKl", randomHex(t, 6)))
}

// enterBesideAs is enterBeside for the saved character of authKey.
func enterBesideAs(t *testing.T, child *childOrchestrator, mapCred, base string, src mapgen.MapConfig, p mapgen.Portal, attrs, authKey string) *client.Client {
	t.Helper()
	var j orchestrator.JoinResponse
	testutil.PostJSON(t, child.public+control.PathJoin, "", fmt.Sprintf(`{"authKey":%q}`, authKey), http.StatusOK, &j)
	var r control.RedeemResult
	testutil.PostJSON(t, child.control+control.PathRedeem, mapCred, fmt.Sprintf(`{"instanceId":%q,"token":%q}`, j.InstanceID, j.Ticket), http.StatusOK, &r)
	x, y := float64(p.X-p.Radius)/100-1, float64(p.Y)/100
	req := fmt.Sprintf(`{"transferId":"tr-%s","characterId":%q,"fromInstanceId":%q,"toMapId":%q,"epoch":%d,`+
		`"state":{"mapId":%q,"x":%g,"y":%g,"attributes":%s,"revision":%d}}`, randomHex(t, 6), r.CharacterID, j.InstanceID, src.MapID, r.Epoch,
		src.MapID, x, y, attrs, time.Now().UnixMicro())
	var a control.TransferAnswer
	testutil.PostJSON(t, child.control+control.PathRequestTransfer, mapCred, req, http.StatusOK, &a)
	c, err := client.Dial(context.Background(), base+a.WS, client.Hello{Ticket: a.Token}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitUntil(t, "the first snapshot on the source map", func() bool { _, ok := c.State().SelfEntity(); return ok })
	if gx, gy := selfPosition(t, c); math.Abs(gx-x) > 0.5 || math.Abs(gy-y) > 0.5 {
		t.Fatalf("entered the source map at (%.2f, %.2f), want its saved (%.2f, %.2f)", gx, gy, x, y)
	}
	return c
}

// walkUntil walks the player east at the input rate until an event matches; it stops
// walking once a transfer is announced, so the arrival is where the map put it.
func walkUntil(t *testing.T, c *client.Client, what string, match func(client.Event) bool) client.Event {
	t.Helper()
	tick := time.NewTicker(time.Second / client.W1InputHz)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	walking := true
	for {
		select {
		case e := <-c.Events():
			if match(e) {
				return e
			}
			if e.Kind == "transfer" {
				walking = false
			}
			if e.Kind == "closed" && e.Err != nil && c.Stats().Dropped {
				t.Fatalf("connection lost waiting for %s: %v", what, e.Err)
			}
		case <-tick.C:
			if walking {
				_, _ = c.Move(127, 0)
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func selfPosition(t *testing.T, c *client.Client) (float64, float64) {
	t.Helper()
	e, ok := c.State().SelfEntity()
	if !ok {
		t.Fatal("the snapshot does not show the player")
	}
	return client.Position(e)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// savedState reads a character's checkpointed state from the orchestrator's database
// (read-only, beside the running orchestrator), or nil.
func savedState(t *testing.T, dbPath, characterID string) *control.CharacterState {
	t.Helper()
	db, err := sql.Open("sqlite", sqlite.DSN(dbPath, true))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := control.CharacterState{CharacterID: characterID}
	var attrs string
	err = db.QueryRow(`SELECT map_id, instance_id, x, y, attributes_json FROM character_state WHERE character_id = ?`, characterID).
		Scan(&st.MapID, &st.InstanceID, &st.X, &st.Y, &attrs)
	if err == sql.ErrNoRows {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	st.Attributes = json.RawMessage(attrs)
	return &st
}
