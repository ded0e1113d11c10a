package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"
	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/edge"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestSwarm_KitAcrossNodes runs the kit from compose/stack.yaml on the lab's two-node
// Swarm, as a host who added a machine would: the orchestrator and the edge on node 1,
// a lobby on node 1 and a dungeon on node 2 (its image placed there by a constraint).
// A player comes in through the edge on node 1, picks up an item and walks through the
// lobby's portal to the dungeon on node 2 with it and its attributes. Then node 2's engine is killed with the
// player in the dungeon: the orchestrator sees the map lost, starts it on node 1, and
// the player's join brings it back into play there with what it carried. Last, the
// orchestrator is killed -9: Swarm starts it again and it adopts every map's service,
// none restarted.
func TestSwarm_KitAcrossNodes(t *testing.T) {
	k := newSwarmKit(t, nil)
	lobby, dungeon := smallMap(t, k.deployment+"-lobby"), smallMap(t, k.deployment+"-dungeon")
	dungeon.Seed++
	lobby.GenerationRules.Portals = []mapgen.PortalRule{{TargetMapID: dungeon.MapID, Count: 1}}
	lobby.GenerationRules.InteractableDensity = 1000
	dungeon.GenerationRules.Portals = []mapgen.PortalRule{{TargetMapID: lobby.MapID, Count: 1}}
	k.createMap(t, lobby, "")
	k.createMap(t, dungeon, k.far)
	if n := k.nodeOf(t, lobby.InstanceID); n != k.lab.Node1ID {
		t.Fatalf("the lobby runs on node %s, want node 1 (%s)", n, k.lab.Node1ID)
	}
	if n := k.nodeOf(t, dungeon.InstanceID); n != k.lab.Node2ID {
		t.Fatalf("the dungeon runs on node %s, want node 2 (%s)", n, k.lab.Node2ID)
	}

	t.Run("HostAssetSetServed", func(t *testing.T) {
		// The host copies a set into the stack's asset volume on the labelled manager;
		// the edge there serves it without a restart.
		vol, err := k.lab.Node1.VolumeInspect(context.Background(), k.stack+"_mapyard-assets")
		if err != nil {
			t.Fatal(err)
		}
		writeHostSet(t, vol.Mountpoint, func(m map[string]any, _ map[string][]byte) { m["version"] = "2" })
		waitFor(t, "the edge to serve mapyard-default@2 from the asset volume", 30*time.Second, func() bool {
			var list struct{ Sets []edge.AssetSetInfo }
			resp, err := http.Get(k.public + edge.AssetSetsPath)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			if json.NewDecoder(resp.Body).Decode(&list) != nil {
				return false
			}
			for _, set := range list.Sets {
				if set.ID == "mapyard-default" && set.Version == "2" {
					return true
				}
			}
			return false
		})
	})

	const carried = `{"gold":12,"studio":{"quest":"intro"}}`
	key := testutil.NewAuthKey(t)
	var c *client.Client
	var character, rejoin string
	var item string
	t.Run("PortalToTheOtherNode", func(t *testing.T) {
		// The player picks up an item beside the lobby's portal, then walks through.
		there := generate(t, lobby).Portals[0]
		it := itemNearPortal(t, lobby, there)
		item = it.ID
		seededItems(t, k.dbPath, lobby)
		c, rejoin = k.enterAtAs(t, key, lobby, float64(it.Place.X)/100, float64(it.Place.Y)/100, carried)
		character = c.Welcome().CharacterID
		pickUp(t, c, item)
		w := walkThrough(t, c, there, dungeon.MapID)
		if w.InstanceID != dungeon.InstanceID || w.CharacterID != character {
			t.Fatalf("arrived as %+v, want %s on %s", w, character, dungeon.InstanceID)
		}
		waitUntil(t, "the dungeon's push of the character", func() bool {
			st := savedState(t, k.dbPath, character)
			return st != nil && st.InstanceID == dungeon.InstanceID
		})
		if st := savedState(t, k.dbPath, character); !sameJSON(t, st.Attributes, carried) {
			t.Fatalf("saved by the dungeon on node 2: %s, want what it carried", st.Attributes)
		}
		if owner := itemOwner(t, k.dbPath, item); owner != character {
			t.Fatalf("item %s is held by %q after the portal, want %s", item, owner, character)
		}
		// Playing there: it walks, and the dungeon's snapshots say so.
		x0, y0 := selfPosition(t, c)
		if _, err := steer(c, x0+3, y0, 0.5, nil, nil); err != nil {
			t.Fatal(err)
		}
	})
	if c == nil {
		t.FailNow()
	}

	t.Run("NodeLostPlayerBack", func(t *testing.T) {
		before := savedState(t, k.dbPath, character)
		// The host lets the dungeon's image run on node 1 too, then node 2 is lost.
		k.label(t, k.lab.Node1ID, k.farLabel, "yes")
		lost := time.Now()
		k.lab.KillNode2(t)
		// The player's stream ends or stalls: it comes back with its session's rejoin
		// credential, as the page and the Go client do, which waits for its map.
		gone := waitGone(c, 15*time.Second)
		c.Close()
		back := k.backInPlay(t, &rejoin)
		t.Cleanup(func() { back.Close() })
		took := time.Since(lost)
		in, _ := k.instance(t, dungeon.InstanceID)
		t.Logf("node 2 lost: the player's stream %s after %s; back in play on %s after %s (restarts %d, reason %q)\n%s",
			gone.how, gone.after.Round(10*time.Millisecond), back.Welcome().InstanceID, took.Round(10*time.Millisecond), in.Restarts, in.Reason,
			k.timeline(t, dungeon.InstanceID, lost))
		if w := back.Welcome(); w.InstanceID != dungeon.InstanceID || w.CharacterID != character {
			t.Fatalf("back as %+v, want %s on %s", w, character, dungeon.InstanceID)
		}
		if n := k.nodeOf(t, dungeon.InstanceID); n != k.lab.Node1ID {
			t.Fatalf("the dungeon runs on node %s after node 2 was lost, want node 1", n)
		}
		if in.Restarts != 1 {
			t.Errorf("dungeon %+v: want one restart for the lost node", in)
		}
		after := savedState(t, k.dbPath, character)
		if !sameJSON(t, after.Attributes, carried) {
			t.Fatalf("after the node loss it carries %s, want %s", after.Attributes, carried)
		}
		if owner := itemOwner(t, k.dbPath, item); owner != character {
			t.Fatalf("item %s is held by %q after the node loss, want %s", item, owner, character)
		}
		// Rolled back no further than the last push before the loss.
		px, py := selfPosition(t, back)
		if d := math.Hypot(px-before.X, py-before.Y); d > 4 {
			t.Errorf("back at (%.1f, %.1f), %.1f units from its last push before the loss (%.1f, %.1f)", px, py, d, before.X, before.Y)
		}
	})

	t.Run("NodeDrainedPlayerBack", func(t *testing.T) {
		// A map placed on node 2 (back after the loss above), a player on it; then the
		// host drains node 2: Swarm stops its tasks at once, the orchestrator starts the
		// map again on node 1, and the player comes back to it there.
		k.lab.WaitNode2(t, swarm.NodeStateReady, time.Minute)
		cellar := smallMap(t, k.deployment+"-cellar")
		cellar.Seed += 2
		// Its image placed on node 2 alone, then let run on node 1 too. (Taking the far
		// label off node 1 instead would stop the dungeon there.)
		k.createMap(t, cellar, k.movable)
		k.label(t, k.lab.Node1ID, k.movableLabel, "yes")
		if n := k.nodeOf(t, cellar.InstanceID); n != k.lab.Node2ID {
			t.Fatalf("the cellar runs on node %s, want node 2", n)
		}
		p, cred := k.enterAtAs(t, testutil.NewAuthKey(t), cellar, 20, 20, carried)
		who := p.Welcome().CharacterID
		waitUntil(t, "the cellar's push of the character", func() bool {
			st := savedState(t, k.dbPath, who)
			return st != nil && st.InstanceID == cellar.InstanceID
		})
		drained := time.Now()
		k.availability(t, k.lab.Node2ID, swarm.NodeAvailabilityDrain)
		t.Cleanup(func() { k.availability(t, k.lab.Node2ID, swarm.NodeAvailabilityActive) })
		gone := waitGone(p, 15*time.Second)
		p.Close()
		back := k.backInPlay(t, &cred)
		t.Logf("node 2 drained: the player's stream %s after %s; back in play after %s\n%s", gone.how, gone.after.Round(10*time.Millisecond),
			time.Since(drained).Round(10*time.Millisecond), k.timeline(t, cellar.InstanceID, drained))
		if w := back.Welcome(); w.InstanceID != cellar.InstanceID || w.CharacterID != who {
			t.Fatalf("back as %+v, want %s on %s", w, who, cellar.InstanceID)
		}
		if n := k.nodeOf(t, cellar.InstanceID); n != k.lab.Node1ID {
			t.Fatalf("the cellar runs on node %s after node 2 was drained, want node 1", n)
		}
		if in, _ := k.instance(t, cellar.InstanceID); in.Restarts != 1 {
			t.Errorf("cellar %+v: want one restart for the drain", in)
		}
		if st := savedState(t, k.dbPath, who); !sameJSON(t, st.Attributes, carried) {
			t.Fatalf("after the drain it carries %s, want %s", st.Attributes, carried)
		}
	})

	t.Run("OrchestratorKilledServicesAdopted", func(t *testing.T) {
		ids := map[string]orchestrator.Instance{}
		for _, id := range []string{k.deployment + "-d", lobby.InstanceID, dungeon.InstanceID} {
			ids[id] = k.waitInstance(t, id, orchestrator.StateReady, time.Minute)
		}
		old := k.orchestratorContainer(t)
		if err := k.lab.Node1.ContainerKill(context.Background(), old, "KILL"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a new orchestrator container", 2*time.Minute, func() bool { return k.orchestratorContainer(t) != old })
		for id, was := range ids {
			in := k.waitInstance(t, id, orchestrator.StateReady, time.Minute)
			if in.ContainerID != was.ContainerID || in.Restarts != was.Restarts {
				t.Errorf("%s after the orchestrator's kill: service %s restarts %d, want %s adopted (restarts %d)",
					id, in.ContainerID, in.Restarts, was.ContainerID, was.Restarts)
			}
		}
	})
}

// itemOwner is the character that holds item id in the orchestrator's database, or "".
func itemOwner(t *testing.T, dbPath, id string) string {
	t.Helper()
	db, err := sql.Open("sqlite", sqlite.DSN(dbPath, true))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var owner sql.NullString
	err = db.QueryRow(`SELECT owner_character_id FROM inventory_items WHERE item_id = ? AND state = 'active'`, id).Scan(&owner)
	if err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	return owner.String
}

// gone is how a player's stream ended after a fault: closed, or stalled (no snapshot
// for a second), and when.
type gone struct {
	how   string
	after time.Duration
}

// waitGone waits up to timeout for c's stream to close or stall.
func waitGone(c *client.Client, timeout time.Duration) gone {
	start := time.Now()
	last, lastAt := c.State().Tick, time.Now()
	for time.Since(start) < timeout {
		select {
		case <-c.Done():
			return gone{"closed", time.Since(start)}
		case e := <-c.Events():
			if e.Kind == "closed" {
				return gone{"closed", time.Since(start)}
			}
		case <-time.After(50 * time.Millisecond):
		}
		if tick := c.State().Tick; tick != last {
			last, lastAt = tick, time.Now()
		} else if time.Since(lastAt) > time.Second {
			return gone{"stalled", time.Since(start)}
		}
	}
	return gone{"went on", time.Since(start)}
}

// joinOnce asks the edge at public for a join ticket with body, once.
func joinOnce(ctx context.Context, edgeURL, body string) (public.JoinResponse, error) {
	var j public.JoinResponse
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, edgeURL+public.PathJoin, strings.NewReader(body))
	if err != nil {
		return j, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return j, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return j, fmt.Errorf("join: %d %s", resp.StatusCode, raw)
	}
	return j, json.Unmarshal(raw, &j)
}
