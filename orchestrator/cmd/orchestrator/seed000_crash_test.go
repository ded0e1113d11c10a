package main

// Seed 000's criteria 5 to 8: crashes of maps and of the orchestrator, and who writes
// SQLite. See seed000_test.go.

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestSeed000_5_MapCrashLeavesOrchestratorAndOtherMaps kills map A's container with
// `docker kill` while players play on map B: B's container goes on untouched, its
// players keep their connections and walk, and its tick keeps counting; the
// orchestrator answers every probe of its public and control listeners throughout;
// A comes back in a new container and takes players again.
func TestSeed000_5_MapCrashLeavesOrchestratorAndOtherMaps(t *testing.T) {
	k := newKit(t)
	b := flatMap(t, k.deployment+"-b")
	k.createMap(t, b)
	bWas := inspect(t, k.cli, k.instance(t, b.InstanceID).ContainerID)
	cx, cy := float64(b.Bounds.Width)/2, float64(b.Bounds.Height)/2
	players := []*client.Client{k.enterAt(t, b, cx, cy, client.Options{}), k.enterAt(t, b, cx+3, cy, client.Options{})}

	probe := startProbe(k)
	defer probe.stop()
	a := k.instance(t, k.def)
	ticks := make([]uint32, len(players))
	for i, p := range players {
		ticks[i] = p.State().Tick
	}
	if err := k.cli.ContainerKill(context.Background(), a.ContainerID, "KILL"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "map A's container to die", func() bool {
		info, err := k.cli.ContainerInspect(context.Background(), a.ContainerID)
		return err != nil || !info.State.Running // gone, or dead
	})

	for i, p := range players {
		x, y := selfPosition(t, p)
		if _, err := steer(p, x, y+2, 0.3, nil, nil); err != nil {
			t.Fatalf("player %d on B after A died: %v", i, err)
		}
		if now := p.State().Tick; now < ticks[i]+15 {
			t.Fatalf("player %d on B: tick %d after %d, want it counting on", i, now, ticks[i])
		}
		ticks[i] = p.State().Tick
	}

	var back orchestrator.Instance
	waitFor(t, "map A back in a new container", 90*time.Second, func() bool {
		back = k.instance(t, k.def)
		return back.State == orchestrator.StateReady && back.ContainerID != a.ContainerID
	})
	j := k.join(t, `{}`)
	if j.InstanceID != k.def {
		t.Fatalf("join after A came back went to %s", j.InstanceID)
	}
	k.play(t, j.WS, j.Ticket, client.Options{})

	for i, p := range players {
		waitUntil(t, "B's tick after A came back", func() bool { return p.State().Tick > ticks[i] })
		if st := p.Stats(); st.Dropped || st.BadSnapshots != 0 || p.Welcome().InstanceID != b.InstanceID {
			t.Fatalf("player %d on B: %+v on %s", i, st, p.Welcome().InstanceID)
		}
	}
	bNow := inspect(t, k.cli, bWas.ID)
	if !bNow.State.Running || bNow.State.StartedAt != bWas.State.StartedAt || bNow.RestartCount != 0 {
		t.Fatalf("map B's container: running %v, started %s (was %s)", bNow.State.Running, bNow.State.StartedAt, bWas.State.StartedAt)
	}
	if inst := k.instance(t, b.InstanceID); inst.State != orchestrator.StateReady || inst.Restarts != 0 || inst.ContainerID != bWas.ID {
		t.Fatalf("map B: %+v", inst)
	}
	n, failures := probe.stop()
	if len(failures) > 0 || n < 10 {
		t.Fatalf("the orchestrator answered %d probes; failures: %v", n, failures)
	}
	t.Logf("map A (%s) was killed and back in %s as %s; the orchestrator answered %d probes meanwhile", a.ContainerID[:12],
		back.ContainerID[:12], k.def, n)
}

// probe asks the orchestrator's public /healthz and control /admin/maps every 50 ms
// until stopped, recording every answer that is not 200.
type probe struct {
	n        atomic.Int64
	mu       sync.Mutex
	failures []string
	done     chan struct{}
	ended    chan struct{}
	once     sync.Once
}

func startProbe(k *kit) *probe {
	p := &probe{done: make(chan struct{}), ended: make(chan struct{})}
	hc := &http.Client{Timeout: 2 * time.Second}
	get := func(url, secret string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if secret != "" {
			req.Header.Set(httpkit.SecretHeader, secret)
		}
		resp, err := hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = errors.New(resp.Status)
			}
		}
		p.n.Add(1)
		if err != nil {
			p.mu.Lock()
			p.failures = append(p.failures, url+": "+err.Error())
			p.mu.Unlock()
		}
	}
	go func() {
		defer close(p.ended)
		for {
			select {
			case <-p.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			get(k.orch.public+"/healthz", "")
			get(k.orch.control+httpapi.PathAdminMaps, k.secret)
		}
	}()
	return p
}

// stop ends the probe and returns how many probes it made and which failed.
func (p *probe) stop() (int64, []string) {
	p.once.Do(func() { close(p.done) })
	<-p.ended
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n.Load(), p.failures
}

// TestSeed000_6_OnlyOrchestratorWritesSQLite: a player's walk on a map reaches the
// database, and only through the orchestrator: no map container has a mount or wrote a
// file, and the map binary running in each (read from the container, checked with `go
// version -m`) carries no SQLite module, while the orchestrator's does and holds the
// database file open.
func TestSeed000_6_OnlyOrchestratorWritesSQLite(t *testing.T) {
	k := newKit(t, "ORCH_CHECKPOINT_MS=200", "MAP_SNAPSHOT_PUSH_MS=200")
	b := flatMap(t, k.deployment+"-b")
	k.createMap(t, b)
	c := k.enterAt(t, b, 500, 500, client.Options{})
	if _, err := steer(c, 503, 500, 0.3, nil, nil); err != nil {
		t.Fatal(err)
	}
	x, _ := selfPosition(t, c)
	waitUntil(t, "the walk in the database", func() bool {
		st := savedState(t, k.dbPath, c.Welcome().CharacterID)
		return st != nil && st.InstanceID == b.InstanceID && math.Abs(st.X-x) < 0.5
	})

	list, err := k.cli.ContainerList(context.Background(), container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", docker.LabelDeployment+"="+k.deployment))})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("%d map containers, want the default map and B", len(list))
	}
	for _, mc := range list {
		info := inspect(t, k.cli, mc.ID)
		name := info.Config.Labels[docker.LabelInstance]
		if len(info.Mounts) != 0 || len(info.HostConfig.Binds) != 0 || len(info.HostConfig.Mounts) != 0 || len(info.HostConfig.Tmpfs) != 0 {
			t.Errorf("map %s has mounts: %+v %v %+v %v", name, info.Mounts, info.HostConfig.Binds, info.HostConfig.Mounts, info.HostConfig.Tmpfs)
		}
		if !info.HostConfig.ReadonlyRootfs {
			t.Errorf("map %s has a writable root file system", name)
		}
		changes, err := k.cli.ContainerDiff(context.Background(), mc.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(changes) != 0 {
			t.Errorf("map %s changed files: %+v", name, changes)
		}
		mods := goVersionM(t, containerFile(t, k, mc.ID, info.Path))
		if !slices.Contains(mods, "github.com/mapyard/mapyard/mapserver/cmd/mapserver") {
			t.Fatalf("map %s runs %s, which is not the map server: %v", name, info.Path, mods)
		}
		for _, m := range mods {
			if strings.Contains(strings.ToLower(m), "sqlite") {
				t.Errorf("map %s's binary carries %s", name, m)
			}
		}
	}

	// The same check finds SQLite in the orchestrator this kit runs (the test binary
	// re-executed), and that process holds the database open.
	if mods := goVersionM(t, os.Args[0]); !slices.Contains(mods, "modernc.org/sqlite") {
		t.Fatalf("go version -m finds no SQLite in the orchestrator: %v", mods)
	}
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(k.orch.cmd.Process.Pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	open := false
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/" + strconv.Itoa(k.orch.cmd.Process.Pid) + "/fd/" + fd.Name()); err == nil && target == k.dbPath {
			open = true
		}
	}
	if !open {
		t.Fatalf("the orchestrator does not hold %s open", k.dbPath)
	}
}

// containerFile copies the file at path out of container id into a temporary file.
func containerFile(t *testing.T, k *kit, id, path string) string {
	t.Helper()
	rc, _, err := k.cli.CopyFromContainer(context.Background(), id, path)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		t.Fatalf("copy %s from %s: %v", path, id, err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, tr); err != nil {
		t.Fatal(err)
	}
	return out
}

// goVersionM lists what `go version -m` says a binary was built from: its main
// package, its module and every dependency module.
func goVersionM(t *testing.T, bin string) []string {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m %s: %v\n%s", bin, err, out)
	}
	var mods []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && (f[0] == "path" || f[0] == "mod" || f[0] == "dep") {
			mods = append(mods, f[1])
		}
	}
	if len(mods) < 2 {
		t.Fatalf("go version -m %s lists no modules:\n%s", bin, out)
	}
	return mods
}

// TestSeed000_7_MapKillRollsBackNoFurtherThanPushWindow walks a saved player east on a
// map, kills the map's process with SIGKILL (no chance to push) and rejoins once the
// orchestrator restarted it: the player comes back on its own path, at most the
// snapshot-push window (MAP_SNAPSHOT_PUSH_MS, plus a tick and the push's own way to
// the orchestrator) behind the last position the map showed. The rollback is logged.
func TestSeed000_7_MapKillRollsBackNoFurtherThanPushWindow(t *testing.T) {
	const window = time.Second
	k := newKit(t, "MAP_SNAPSHOT_PUSH_MS="+strconv.Itoa(int(window/time.Millisecond)))
	m := flatMap(t, k.deployment+"-m")
	k.createMap(t, m)
	key := testutil.NewAuthKey(t)
	x0, y0 := 500.0, 500.0
	c := k.enterAtAs(t, key, m, x0, y0, `{}`, client.Options{})
	character := c.Welcome().CharacterID

	// Walk east, recording every position the server shows with its tick, for two and a
	// half windows, then kill the map's process and keep recording until the
	// connection ends: all of it is what the map had simulated.
	type sample struct {
		tick uint32
		x, y float64
	}
	var path []sample
	record := func() {
		s := c.State()
		if e, ok := s.SelfEntity(); ok && (len(path) == 0 || path[len(path)-1].tick != s.Tick) {
			x, y := client.Position(e)
			path = append(path, sample{s.Tick, x, y})
		}
	}
	inst := k.instance(t, m.InstanceID)
	pid := inspect(t, k.cli, inst.ContainerID).State.Pid
	tick := time.NewTicker(time.Second / client.W1InputHz)
	defer tick.Stop()
	start, killed := time.Now(), false
	deadline := time.After(30 * time.Second)
	for walking := true; walking; {
		select {
		case <-tick.C:
			record()
			if !killed {
				_, _ = c.Move(127, 0)
			}
			if !killed && time.Since(start) > window*5/2 {
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatalf("kill -9 %d: %v", pid, err)
				}
				killed = true
			}
		case <-c.Done():
			walking = false
		case <-deadline:
			t.Fatal("the player's connection outlived its map")
		}
	}
	last := path[len(path)-1]

	waitFor(t, "the map back in a new container", 90*time.Second, func() bool {
		i := k.instance(t, m.InstanceID)
		return i.State == orchestrator.StateReady && i.ContainerID != inst.ContainerID
	})
	j := k.join(t, `{"authKey":"`+key+`"}`)
	if j.CharacterID != character || j.InstanceID != m.InstanceID {
		t.Fatalf("rejoin %+v, want %s on %s", j, character, m.InstanceID)
	}
	back := k.play(t, j.WS, j.Ticket, client.Options{})
	bx, by := selfPosition(t, back)
	if math.Abs(by-y0) > 0.5 || bx < x0-0.5 || bx > last.x+0.5 {
		t.Fatalf("came back at (%.2f, %.2f), off the path from (%.1f, %.1f) to (%.2f, %.2f)", bx, by, x0, y0, last.x, last.y)
	}
	saved := path[0]
	for _, s := range path {
		if math.Abs(s.x-bx) < math.Abs(saved.x-bx) {
			saved = s
		}
	}
	rollback := time.Duration(last.tick-saved.tick) * time.Second / time.Duration(c.Welcome().TickHz)
	t.Logf("seed 000 criterion 7: map killed with the player at x=%.2f (tick %d); it came back at x=%.2f (tick %d): "+
		"rolled back %.2f units, %d ticks = %s, with MAP_SNAPSHOT_PUSH_MS=%d", last.x, last.tick, bx, saved.tick,
		last.x-bx, last.tick-saved.tick, rollback, window.Milliseconds())
	if limit := window + 250*time.Millisecond; rollback > limit {
		t.Fatalf("rolled back %s, more than the push window %s (allowing %s)", rollback, window, limit)
	}
}
