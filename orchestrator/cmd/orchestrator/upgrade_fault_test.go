package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/wire"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// handoffDelay is MAP_FAULT_HANDOFF_DELAY_MS for the tests that interrupt a handoff:
// the cut waits this long after each handoff call, so the upgrade stays handing_off
// long enough for a test to see it and kill something.
const handoffDelay = 3 * time.Second

// TestUpgrade_OrchestratorKilledMidUpgrade kills the orchestrator with SIGKILL in the
// middle of a live upgrade of a map with players connected through the edge, one of
// them holding an item its pickup was acknowledged for, and starts it again on the
// same database: as soon as the upgrade was accepted (starting), and while the
// previous container hands its players over (handing_off, the cut held back by
// MAP_FAULT_HANDOFF_DELAY_MS). Either way the upgrade ends, done (carried forward) or
// failed (rolled back); the instance then runs one container, under its own name, of
// the image the outcome says; every player plays on it (its socket still open, or
// back by itself) where it stood; and the acknowledged pickup is still the holder's.
func TestUpgrade_OrchestratorKilledMidUpgrade(t *testing.T) {
	for _, c := range []struct {
		name  string
		env   []string
		phase string // the kill waits for it
	}{
		{"Starting", nil, orchestrator.UpgradeStarting},
		{"HandingOff", []string{"MAP_FAULT_HANDOFF_DELAY_MS=" + strconv.Itoa(int(handoffDelay/time.Millisecond))}, orchestrator.UpgradeHandingOff},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newUpgradeRig(t, 4, c.env...)
			started := r.startUpgrade(t)
			if c.phase != orchestrator.UpgradeStarting {
				waitFor(t, "the upgrade "+c.phase, 60*time.Second, func() bool {
					u := r.k.instance(t, r.arena.InstanceID).Upgrade
					return u != nil && u.Phase == c.phase
				})
			}
			if err := r.k.orch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if err := r.k.orch.wait(10 * time.Second); err == nil {
				t.Fatal("the killed orchestrator exited cleanly")
			}
			killedAt := time.Since(started)
			r.k.restart(t)

			end := r.upgradeEnd(t)
			switch end.Upgrade.Phase {
			case orchestrator.UpgradeDone:
				r.onNext(t, end)
			case orchestrator.UpgradeFailed:
				if end.Image != r.before.Image || end.ContainerID != r.before.ContainerID {
					t.Fatalf("a rolled-back upgrade left the map %+v, want its container %s of %s", end, r.before.ContainerID, r.before.Image)
				}
			}
			r.oneContainer(t, end)
			for i, p := range r.players {
				p.playing(t, r.arena.InstanceID)
				if x, y := selfPosition(t, p.c); math.Abs(x-p.x) > 0.05 || math.Abs(y-p.y) > 0.05 {
					t.Fatalf("player %d stands at (%.2f, %.2f) after the upgrade, (%.2f, %.2f) before", i, x, y, p.x, p.y)
				}
			}
			r.allOn(t, end)
			r.itemKept(t)
			r.stillPlays(t)
			t.Logf("orchestrator killed %s into the upgrade (%s); the upgrade ended %s: %+v; players' resumes/rejoins %s",
				killedAt.Round(time.Millisecond), c.phase, end.Upgrade.Phase, *end.Upgrade, r.comebacks())
		})
	}
}

// TestUpgrade_MapKilledMidHandoff kills the previous container (docker kill) while it
// hands its players over, its cut held back by MAP_FAULT_HANDOFF_DELAY_MS: the players'
// sockets end, and each comes back by itself on the next container as after any map
// crash (a resume, else a join anew); the upgrade ends done, its handoff reported as
// fallen back with every player remaining (they rejoined); the next container is the instance's, under its own name, and the
// only one left; and the acknowledged pickup is still the holder's.
func TestUpgrade_MapKilledMidHandoff(t *testing.T) {
	r := newUpgradeRig(t, 4, "MAP_FAULT_HANDOFF_DELAY_MS="+strconv.Itoa(int(handoffDelay/time.Millisecond)))
	started := r.startUpgrade(t)
	waitFor(t, "the upgrade handing off", 60*time.Second, func() bool {
		u := r.k.instance(t, r.arena.InstanceID).Upgrade
		return u != nil && u.Phase == orchestrator.UpgradeHandingOff
	})
	if err := r.k.cli.ContainerKill(context.Background(), r.before.ContainerID, "KILL"); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Since(started)

	end := r.upgradeEnd(t)
	if u := end.Upgrade; u.Phase != orchestrator.UpgradeDone || u.Moved != 0 || !u.Fallback || u.Remaining != len(r.players) {
		t.Fatalf("upgrade ended %+v, want done, fallen back, nobody moved and all %d players left to rejoin", u, len(r.players))
	}
	r.onNext(t, end)
	r.oneContainer(t, end)
	for _, p := range r.players {
		waitUntil(t, "the player back", func() bool { st := p.c.Stats(); return st.Resumes+st.Rejoins >= 1 })
		p.playing(t, r.arena.InstanceID)
	}
	r.allOn(t, end)
	r.itemKept(t)
	r.stillPlays(t)
	t.Logf("previous container killed %s into the upgrade (handing_off); the upgrade ended %+v; players' resumes/rejoins %s",
		killedAt.Round(time.Millisecond), *end.Upgrade, r.comebacks())
}

// upgradeRig is a kit with a loot map to upgrade, its players connected through the
// edge, the first of them holding an item its pickup was acknowledged for.
type upgradeRig struct {
	k       *kit
	next    string // the image the upgrade goes to
	arena   mapgen.MapConfig
	before  orchestrator.Instance
	players []*upgradePlayer
	item    string // the item players[0] holds
}

// upgradePlayer is one player of an upgradeRig: its client (which resumes, else joins
// anew, when its socket ends), where it stood, and what the map told it.
type upgradePlayer struct {
	c         *client.Client
	character string
	x, y      float64
	moving    atomic.Int32
	welcomes  atomic.Int32
	mu        sync.Mutex
	picked    map[string]bool // acknowledged pickups, by item id
}

// newUpgradeRig starts a kit that allows the upgrade to a second tag of the map image,
// creates a small loot map with the fault variables env, enters n saved players
// standing still (and waits until the map pushed each one's state), and has the first
// pick up the item it stands by.
func newUpgradeRig(t *testing.T, n int, env ...string) *upgradeRig {
	t.Helper()
	r := &upgradeRig{next: "mapyard/map-next:" + randomHex(t, 4)}
	r.k = newKit(t, "ORCH_MAP_IMAGES="+r.next, "ORCH_CHECKPOINT_MS=200", "ORCH_ALLOW_FAULT_INJECTION=1", "MAP_SNAPSHOT_PUSH_MS=500")
	dockertest.TagImage(t, r.k.cli, dockertest.MapImage(), r.next)
	r.arena = lootMap(t, r.k.deployment+"-up", 100, 15)
	postMap(t, r.k.orch.control, r.k.secret, r.arena, env...)
	r.before = waitInstance(t, r.k.orch.control, r.k.secret, r.arena.InstanceID, orchestrator.StateReady, 60*time.Second)
	ground := seededItems(t, r.k.dbPath, r.arena)

	for i := range n {
		p := &upgradePlayer{picked: map[string]bool{}}
		x, y := 10+float64(i)*15, 80.0
		if i == 0 {
			x, y = float64(ground[0].Place.X)/100, float64(ground[0].Place.Y)/100+0.5
		}
		key := testutil.NewAuthKey(t)
		p.c = r.k.enterAtAs(t, key, r.arena, x, y, `{}`, client.Options{Resume: true, Rejoin: r.k.rejoiner(key)})
		p.character = p.c.Welcome().CharacterID
		p.x, p.y = selfPosition(t, p.c)
		go p.read()
		r.players = append(r.players, p)
	}
	// Every character's state saved on the arena: a player whose map dies comes back
	// from there, as after any crash.
	for _, p := range r.players {
		waitUntil(t, "the player's state pushed from the arena", func() bool {
			st := savedState(t, r.k.dbPath, p.character)
			return st != nil && st.InstanceID == r.arena.InstanceID
		})
	}
	r.item = ground[0].ID
	if _, err := r.players[0].c.Command("items", "pickup", map[string]string{"itemId": r.item}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the pickup acknowledged", func() bool { return r.players[0].holds(r.item) })
	return r
}

// read records what the map tells the player.
func (p *upgradePlayer) read() {
	for e := range p.c.Events() {
		switch {
		case e.Kind == wire.KindEvent && e.Event.Name == wire.EventMoving:
			p.moving.Add(1)
		case e.Kind == wire.KindWelcome:
			p.welcomes.Add(1)
		}
		if id, who, ok := picked(e); ok && who == p.character {
			p.mu.Lock()
			p.picked[id] = true
			p.mu.Unlock()
		}
	}
}

// holds reports whether the player's pickup of item was acknowledged.
func (p *upgradePlayer) holds(item string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.picked[item]
}

// playing waits until the player's client, open, shows it on instance in a snapshot.
func (p *upgradePlayer) playing(t *testing.T, instance string) {
	t.Helper()
	select {
	case <-p.c.Done():
		t.Fatalf("player %s: its client ended: %+v", p.character, p.c.Stats())
	default:
	}
	waitUntil(t, "a snapshot showing the player", func() bool { _, ok := p.c.State().SelfEntity(); return ok })
	if w := p.c.Welcome(); w.InstanceID != instance || w.CharacterID != p.character {
		t.Fatalf("player %s welcomed as %s on %s", p.character, w.CharacterID, w.InstanceID)
	}
}

// rejoiner is a client's Options.Rejoin for the saved character of authKey: a join
// through the edge.
func (k *kit) rejoiner(authKey string) func(ctx context.Context) (string, client.Hello, error) {
	return func(ctx context.Context) (string, client.Hello, error) {
		body := fmt.Sprintf(`{"authKey":%q}`, authKey)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, k.edge.PublicURL()+public.PathJoin, strings.NewReader(body))
		if err != nil {
			return "", client.Hello{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", client.Hello{}, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", client.Hello{}, fmt.Errorf("join: status %d", resp.StatusCode)
		}
		var j public.JoinResponse
		if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
			return "", client.Hello{}, err
		}
		return k.ws + j.WS, client.Hello{Ticket: j.Ticket}, nil
	}
}

// startUpgrade asks for the upgrade of the arena to the next image and returns when
// it was accepted.
func (r *upgradeRig) startUpgrade(t *testing.T) time.Time {
	t.Helper()
	var started orchestrator.Instance
	testutil.PostJSON(t, r.k.orch.control+httpapi.PathAdminMaps+"/"+r.arena.InstanceID+"/upgrade", r.k.secret,
		fmt.Sprintf(`{"image":%q}`, r.next), http.StatusAccepted, &started)
	if started.Upgrade == nil || started.Upgrade.Phase != orchestrator.UpgradeStarting {
		t.Fatalf("upgrade answer %+v, want it starting", started)
	}
	return time.Now()
}

// upgradeEnd waits until the arena's upgrade ended, done or failed.
func (r *upgradeRig) upgradeEnd(t *testing.T) orchestrator.Instance {
	t.Helper()
	var end orchestrator.Instance
	waitFor(t, "the upgrade's end", 90*time.Second, func() bool {
		end = r.k.instance(t, r.arena.InstanceID)
		return end.Upgrade != nil && (end.Upgrade.Phase == orchestrator.UpgradeDone || end.Upgrade.Phase == orchestrator.UpgradeFailed)
	})
	if end.State != orchestrator.StateReady {
		t.Fatalf("after the upgrade the map is %s (%s)", end.State, end.Reason)
	}
	return end
}

// onNext checks that the upgraded map runs a new container of the next image under
// the instance's own name.
func (r *upgradeRig) onNext(t *testing.T, end orchestrator.Instance) {
	t.Helper()
	if end.Image != r.next || end.ContainerID == r.before.ContainerID || end.Generation == r.before.Generation {
		t.Fatalf("after the upgrade %+v, want a new container of %s", end, r.next)
	}
	info := inspect(t, r.k.cli, end.ContainerID)
	if info.Config.Image != r.next || strings.TrimPrefix(info.Name, "/") != docker.ContainerName(r.k.deployment, r.arena.InstanceID) {
		t.Fatalf("the map's container runs %s named %s", info.Config.Image, info.Name)
	}
}

// oneContainer checks that the kit runs two containers, the default map's and the
// arena's (end's), and no next container is left.
func (r *upgradeRig) oneContainer(t *testing.T, end orchestrator.Instance) {
	t.Helper()
	var names []string
	waitFor(t, "the default map's and the arena's containers alone", 30*time.Second, func() bool {
		names = names[:0]
		ids := r.k.list(t)
		for _, id := range ids {
			names = append(names, strings.TrimPrefix(inspect(t, r.k.cli, id).Name, "/"))
		}
		return len(ids) == 2
	})
	for _, n := range names {
		if strings.HasSuffix(n, "_next") {
			t.Fatalf("containers %v: a next container is left", names)
		}
	}
	if !inspect(t, r.k.cli, end.ContainerID).State.Running {
		t.Fatalf("the arena's container %s is not running", end.ContainerID)
	}
}

var metricLine = regexp.MustCompile(`(?m)^(mapyard_map_players|mapyard_map_connections) (\S+)$`)

// allOn waits until the arena's one container counts every player in its game and
// connected to it.
func (r *upgradeRig) allOn(t *testing.T, end orchestrator.Instance) {
	t.Helper()
	want := float64(len(r.players))
	var got map[string]float64
	waitUntil(t, "every player on the arena's container", func() bool {
		body := testutil.Do(t, http.MethodGet, r.k.orch.control+httpapi.PathMapMetrics+"/"+r.arena.InstanceID, r.k.secret, nil, http.StatusOK, nil)
		got = map[string]float64{}
		for _, m := range metricLine.FindAllStringSubmatch(string(body), -1) {
			got[m[1]], _ = strconv.ParseFloat(m[2], 64)
		}
		return got["mapyard_map_players"] == want && got["mapyard_map_connections"] == want
	})
	if now := r.k.instance(t, r.arena.InstanceID); now.ContainerID != end.ContainerID {
		t.Fatalf("the arena's container changed from %s to %s", end.ContainerID, now.ContainerID)
	}
}

// itemKept checks that the item players[0] picked up is still its own.
func (r *upgradeRig) itemKept(t *testing.T) {
	t.Helper()
	holder := r.players[0].character
	var held struct{ Items []orchestrator.ItemRecord }
	testutil.GetJSON(t, r.k.orch.control+httpapi.PathAdminItems+"?holder="+holder, r.k.secret, http.StatusOK, &held)
	if len(held.Items) != 1 || held.Items[0].ID != r.item || held.Items[0].Holder != holder {
		t.Fatalf("%s holds %+v, want the item %s its pickup was acknowledged for", holder, held.Items, r.item)
	}
}

// stillPlays moves every player east and waits until the map shows it moved.
func (r *upgradeRig) stillPlays(t *testing.T) {
	t.Helper()
	for _, p := range r.players {
		x0, _ := selfPosition(t, p.c)
		waitUntil(t, "a move answered", func() bool {
			if _, err := p.c.Move(1, 0); err != nil {
				t.Fatal(err)
			}
			x, _ := selfPosition(t, p.c)
			return x > x0+0.1
		})
	}
}

// comebacks sums the players' resumes and rejoins.
func (r *upgradeRig) comebacks() string {
	var resumes, rejoins int64
	for _, p := range r.players {
		st := p.c.Stats()
		resumes, rejoins = resumes+st.Resumes, rejoins+st.Rejoins
	}
	return fmt.Sprintf("%d/%d", resumes, rejoins)
}
