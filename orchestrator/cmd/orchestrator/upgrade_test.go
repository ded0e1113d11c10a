package main

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/wire"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestUpgrade_LiveWithPlayersConnected upgrades a real map container to a second image
// tag while real players are connected through the edge: no player's socket closes,
// each is told it moves and is welcomed again on the same socket by the new container,
// where it stands exactly where it stood; the map then runs the new image under its
// own name, the previous container gone. Upgrades the host does not allow, to an image
// the engine lacks, or of a map being upgraded already, are refused with nothing
// touched.
func TestUpgrade_LiveWithPlayersConnected(t *testing.T) {
	suffix := randomHex(t, 4)
	next, missing := "mapyard/map-next:"+suffix, "mapyard/map-next:"+suffix+"-missing"
	k := newKit(t, "ORCH_MAP_IMAGES="+next+","+missing, "ORCH_CHECKPOINT_MS=200", "MAP_SNAPSHOT_PUSH_MS=10000")
	dockertest.TagImage(t, k.cli, dockertest.MapImage(), next)
	arena := smallMap(t, k.deployment+"-up")
	k.createMap(t, arena)
	before := k.instance(t, arena.InstanceID)

	// Players standing still, each at its own spot; a player's input stops at the cut,
	// so standing still makes "where it stood" exact.
	const players = 6
	var clients []*client.Client
	var moving [players]atomic.Int32
	var welcomes [players]atomic.Int32
	var closed [players]atomic.Value // the client's "closed" event, if its socket ends
	for i := range players {
		c := k.enterAt(t, arena, 100+float64(i)*10, 120, client.Options{})
		clients = append(clients, c)
		go func() {
			for e := range c.Events() {
				switch {
				case e.Kind == wire.KindEvent && e.Event.Name == wire.EventMoving:
					moving[i].Add(1)
				case e.Kind == wire.KindWelcome:
					welcomes[i].Add(1)
				case e.Kind == "closed":
					closed[i].Store(fmt.Sprintf("close code %d: %v", e.Close, e.Err))
				}
			}
		}()
	}
	type spot struct{ x, y float64 }
	var stood []spot
	for _, c := range clients {
		x, y := selfPosition(t, c)
		stood = append(stood, spot{x, y})
	}

	t.Run("ErrRefused", func(t *testing.T) {
		url := k.orch.control + httpapi.PathAdminMaps + "/" + arena.InstanceID + "/upgrade"
		for _, c := range []struct {
			body   string
			status int
			code   string
		}{
			{`{"image":"evil/miner:1"}`, http.StatusBadRequest, apierr.EIMAGENOTALLOWED},
			{fmt.Sprintf(`{"image":%q}`, missing), http.StatusNotFound, apierr.EIMAGEMISSING},
			{`{"image":""}`, http.StatusBadRequest, apierr.EBADREQUEST},
			{`{"image":`, http.StatusBadRequest, apierr.EBADREQUEST},
		} {
			var e struct{ Error apierr.Error }
			testutil.PostJSON(t, url, k.secret, c.body, c.status, &e)
			if e.Error.Code != c.code {
				t.Fatalf("upgrade %s: %+v, want %s", c.body, e.Error, c.code)
			}
		}
		testutil.PostJSON(t, k.orch.control+httpapi.PathAdminMaps+"/nope-1/upgrade", k.secret, fmt.Sprintf(`{"image":%q}`, next), http.StatusNotFound, nil)
		if got := k.instance(t, arena.InstanceID); got.ContainerID != before.ContainerID || got.Upgrade != nil {
			t.Fatalf("a refused upgrade touched the map: %+v", got)
		}
	})

	t.Run("NoSocketClosedNoRollback", func(t *testing.T) {
		url := k.orch.control + httpapi.PathAdminMaps + "/" + arena.InstanceID + "/upgrade"
		var started orchestrator.Instance
		testutil.PostJSON(t, url, k.secret, fmt.Sprintf(`{"image":%q}`, next), http.StatusAccepted, &started)
		if started.Upgrade == nil || started.Upgrade.Image != next {
			t.Fatalf("upgrade answer %+v, want its progress", started)
		}
		var e struct{ Error apierr.Error }
		testutil.PostJSON(t, url, k.secret, fmt.Sprintf(`{"image":%q}`, next), http.StatusConflict, &e)

		var done orchestrator.Instance
		waitFor(t, "the upgrade's end", 60*time.Second, func() bool {
			done = k.instance(t, arena.InstanceID)
			return done.Upgrade != nil && (done.Upgrade.Phase == orchestrator.UpgradeDone || done.Upgrade.Phase == orchestrator.UpgradeFailed)
		})
		if u := done.Upgrade; u.Phase != orchestrator.UpgradeDone || u.Moved != players || u.Remaining != 0 || u.Fallback {
			t.Fatalf("upgrade ended %+v, want done with all %d players moved", u, players)
		}
		if done.Image != next || done.ContainerID == before.ContainerID || done.Generation == before.Generation {
			t.Fatalf("after the upgrade %+v, want a new container of %s", done, next)
		}
		info := inspect(t, k.cli, done.ContainerID)
		if info.Config.Image != next || strings.TrimPrefix(info.Name, "/") != docker.ContainerName(k.deployment, arena.InstanceID) {
			t.Fatalf("the map's container runs %s named %s", info.Config.Image, info.Name)
		}
		if got := k.list(t); len(got) != 2 { // the default map's and the arena's
			t.Fatalf("containers after the upgrade: %v, want the previous one gone", got)
		}
		for i, c := range clients {
			select {
			case <-c.Done():
				waitUntil(t, "the closed event", func() bool { return closed[i].Load() != nil })
				t.Fatalf("player %d's socket closed during the upgrade (%s); welcomes %d, moving events %d", i, closed[i].Load(), welcomes[i].Load(), moving[i].Load())
			default:
			}
			waitUntil(t, "the new container's welcome", func() bool { return welcomes[i].Load() >= 1 && moving[i].Load() == 1 })
			waitUntil(t, "a snapshot from the new container", func() bool { _, ok := c.State().SelfEntity(); return ok })
			x, y := selfPosition(t, c)
			if math.Abs(x-stood[i].x) > 0.05 || math.Abs(y-stood[i].y) > 0.05 {
				t.Fatalf("player %d stands at (%.2f, %.2f) after the upgrade, (%.2f, %.2f) before", i, x, y, stood[i].x, stood[i].y)
			}
		}
		// Still playing: a move is answered by the new container.
		if _, err := clients[0].Move(1, 0); err != nil {
			t.Fatal(err)
		}
		x0 := stood[0].x
		waitUntil(t, "a move on the new container", func() bool { x, _ := selfPosition(t, clients[0]); return x > x0+0.1 })
	})
}
