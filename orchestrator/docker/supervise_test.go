package docker_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
	"github.com/mapyard/mapyard/orchestrator/supervise"
)

// TestSupervisor_KillRestarts kills a ready map with SIGKILL: the die event is seen,
// the map is restarted and ready again, and the other map's container is untouched.
func TestSupervisor_KillRestarts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	def, other := h.deployment+"-d", h.deployment+"-b"
	h.create(other)
	victim := h.waitState(def, orchestrator.StateReady, 30*time.Second)
	bystander := h.waitState(other, orchestrator.StateReady, 30*time.Second)
	before := h.inspect(bystander.ContainerID)

	ctx := context.Background()
	if err := h.cli.ContainerKill(ctx, victim.ContainerID, "KILL"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("restart begun", 5*time.Second, func() bool {
		return h.sawTransition(def, orchestrator.StateRestarting, "container exited with code 137")
	})
	var after orchestrator.Instance
	h.waitFor("ready on a new container", 30*time.Second, func() bool {
		after, _ = h.sup.Instance(def)
		return after.State == orchestrator.StateReady && after.ContainerID != victim.ContainerID
	})
	if after.Restarts != 1 || after.LastExitCode == nil || *after.LastExitCode != 137 {
		t.Fatalf("after kill: restarts=%d lastExitCode=%v, want 1 and 137", after.Restarts, after.LastExitCode)
	}
	if got := testutil.ToFloat64(h.sup.Metrics.Restarts.WithLabelValues(def)); got != 1 {
		t.Fatalf("restart metric %v, want 1", got)
	}
	if _, err := h.cli.ContainerInspect(ctx, victim.ContainerID); err == nil {
		t.Error("killed container was not removed")
	}

	t.Run("OtherMapsUntouched", func(t *testing.T) {
		b, _ := h.sup.Instance(other)
		now := h.inspect(bystander.ContainerID)
		if b.ContainerID != bystander.ContainerID || b.Restarts != 0 || b.State != orchestrator.StateReady {
			t.Fatalf("bystander %+v, want same container, no restarts, ready", b)
		}
		if !now.State.Running || now.State.StartedAt != before.State.StartedAt || now.RestartCount != 0 {
			t.Fatalf("bystander container restarted: running=%v started %s→%s", now.State.Running, before.State.StartedAt, now.State.StartedAt)
		}
	})
}

// TestSupervisor_CrashLoopQuarantine starts a map that exits with code 3 right after it
// starts: it is restarted 3 times within the window, then quarantined, Acquire fails
// fast with map_quarantined, and after the quarantine it is tried again.
func TestSupervisor_CrashLoopQuarantine(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(s *supervise.Supervisor) {
		s.AllowFaultEnv = true
		s.Policy = supervise.RestartPolicy{Window: 60 * time.Second, Max: 3, Quarantine: 3 * time.Second}
	})
	id := h.deployment + "-crash"
	h.create(id, "MAP_FAULT_EXIT_AFTER_MS=200")
	q := h.waitState(id, orchestrator.StateQuarantined, 60*time.Second)
	if q.Restarts != 3 || q.LastExitCode == nil || *q.LastExitCode != 3 {
		t.Fatalf("quarantined with restarts=%d lastExitCode=%v, want 3 and 3", q.Restarts, q.LastExitCode)
	}
	if !strings.Contains(q.Reason, "3 restarts within") {
		t.Errorf("reason %q does not explain the quarantine", q.Reason)
	}

	t.Run("ErrMapQuarantined", func(t *testing.T) {
		start := time.Now()
		_, err := h.sup.Acquire(context.Background(), id)
		if code := apierr.Code(err); code != apierr.EMAPQUARANTINED {
			t.Fatalf("Acquire: code %q (%v), want map_quarantined", code, err)
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("Acquire took %s; a quarantined map must fail fast", d)
		}
	})
	t.Run("TriedAgainAfterQuarantine", func(t *testing.T) {
		h.waitFor("quarantine to end", 10*time.Second, func() bool {
			return h.sawTransition(id, orchestrator.StateStarting, "quarantine over")
		})
	})
	if got := testutil.ToFloat64(h.sup.Metrics.Quarantines); got < 1 {
		t.Fatalf("quarantine metric %v", got)
	}
}

// TestSupervisor_GamePanicRestarted starts a map whose game panics in its thirtieth
// tick (MAP_FAULT_PANIC_AT_TICK), a second after it starts: the map exits non-zero and
// is restarted like any crash, again and again until the crash loop is quarantined.
// Never a map that stays up with its tick hung.
func TestSupervisor_GamePanicRestarted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(s *supervise.Supervisor) {
		s.AllowFaultEnv = true
		s.Policy = supervise.RestartPolicy{Window: 60 * time.Second, Max: 2, Quarantine: time.Minute}
	})
	id := h.deployment + "-panic"
	h.create(id, "MAP_FAULT_PANIC_AT_TICK=30")
	q := h.waitState(id, orchestrator.StateQuarantined, 90*time.Second)
	if q.Restarts != 2 || q.LastExitCode == nil || *q.LastExitCode != 2 {
		t.Fatalf("quarantined with restarts=%d lastExitCode=%v, want 2 restarts of a map that exited with Go's panic status 2", q.Restarts, q.LastExitCode)
	}
}

// TestSupervisor_OutOfMemoryRestarted runs a map that, on SIGUSR1, allocates until its
// container's memory limit has the kernel kill it (MAP_FAULT_ALLOCATE_ON_SIGUSR1): the
// orchestrator sees an out-of-memory kill, says so on the instance and in its exits
// metric, and starts the map again in a new container.
func TestSupervisor_OutOfMemoryRestarted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(s *supervise.Supervisor) { s.AllowFaultEnv = true })
	id := h.deployment + "-greedy"
	h.create(id, "MAP_FAULT_ALLOCATE_ON_SIGUSR1=true")
	first := h.waitState(id, orchestrator.StateReady, 30*time.Second)
	if err := h.cli.ContainerKill(context.Background(), first.ContainerID, "SIGUSR1"); err != nil {
		t.Fatal(err)
	}
	var again orchestrator.Instance
	h.waitFor("the map back in a new container after its OOM kill", 60*time.Second, func() bool {
		again, _ = h.sup.Instance(id)
		return again.State == orchestrator.StateReady && again.ContainerID != first.ContainerID
	})
	if !again.OOMKilled || again.Restarts != 1 {
		t.Fatalf("after the allocation: %+v, want oomKilled and one restart", again)
	}
	if got := testutil.ToFloat64(h.sup.Metrics.Exits.WithLabelValues("oom")); got != 1 {
		t.Fatalf("oom exits %v, want 1", got)
	}
}

// TestSupervisor_FailingHealthRestarts runs a map whose /health answers 503: the probes
// make it unhealthy and it is restarted.
func TestSupervisor_FailingHealthRestarts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(s *supervise.Supervisor) { s.AllowFaultEnv = true })
	id := h.deployment + "-sick"
	h.create(id, "MAP_FAULT_FAIL_HEALTH=true")
	h.waitFor("unhealthy from failing probes", 30*time.Second, func() bool {
		return h.sawTransition(id, orchestrator.StateUnhealthy, "health probes failed")
	})
	h.waitFor("restart", 10*time.Second, func() bool {
		return h.sawTransition(id, orchestrator.StateRestarting, "health probes failed")
	})
	if inst, _ := h.sup.Instance(id); inst.Restarts < 1 {
		t.Fatalf("restarts %d, want at least 1", inst.Restarts)
	}
}

// TestSupervisor_CleanStop checks that a map stopped with SIGTERM (exit 0) is not
// counted as a crash, that a join then starts it again (lazy spawn), and that the
// admin stop is clean too.
func TestSupervisor_CleanStop(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	id := h.deployment + "-calm"
	h.create(id)
	first := h.waitState(id, orchestrator.StateReady, 30*time.Second)
	ctx := context.Background()

	t.Run("SIGTERMNotACrash", func(t *testing.T) {
		timeout := 5
		if err := h.cli.ContainerStop(ctx, first.ContainerID, container.StopOptions{Signal: "SIGTERM", Timeout: &timeout}); err != nil {
			t.Fatal(err)
		}
		st := h.waitState(id, orchestrator.StateStopped, 10*time.Second)
		if st.Restarts != 0 || st.LastExitCode == nil || *st.LastExitCode != 0 {
			t.Fatalf("after SIGTERM: restarts=%d lastExitCode=%v, want 0 and 0", st.Restarts, st.LastExitCode)
		}
		if got := testutil.ToFloat64(h.sup.Metrics.Exits.WithLabelValues("crash")); got != 0 {
			t.Fatalf("crash exits %v, want 0", got)
		}
	})
	t.Run("LazySpawn", func(t *testing.T) {
		inst, err := h.sup.Acquire(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if inst.State != orchestrator.StateReady || inst.ContainerID == first.ContainerID || inst.Restarts != 0 {
			t.Fatalf("acquired %+v, want ready on a new container, no restarts", inst)
		}
	})
	t.Run("AdminStop", func(t *testing.T) {
		if err := h.sup.Stop(ctx, id); err != nil {
			t.Fatal(err)
		}
		st, _ := h.sup.Instance(id)
		if st.State != orchestrator.StateStopped || st.Restarts != 0 {
			t.Fatalf("after stop: %+v", st)
		}
		if got := testutil.ToFloat64(h.sup.Metrics.Exits.WithLabelValues("crash")); got != 0 {
			t.Fatalf("crash exits %v, want 0", got)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		if _, err := h.sup.Acquire(ctx, "nope"); apierr.Code(err) != apierr.ENOTFOUND {
			t.Fatalf("Acquire of an unknown instance: %v", err)
		}
	})
}

// TestSupervisor_WarmPool hands a warm-pool container to a new instance, which is
// ready at once under the instance's container name, and the pool is refilled.
func TestSupervisor_WarmPool(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(s *supervise.Supervisor) { s.PoolSize = 1 })
	h.waitState(h.deployment+"-d", orchestrator.StateReady, 30*time.Second)
	h.reachableOnMapNetwork(h.deployment + "-d")
	h.waitFor("pool ready", 30*time.Second, func() bool { return h.sup.Pool().Ready == 1 })

	id := h.deployment + "-warm"
	start := time.Now()
	h.create(id)
	inst, err := h.sup.Acquire(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("warm pool handout to ready: %s", time.Since(start))
	h.reachableOnMapNetwork(id)
	// The map may register as its new instance before the handout's start-instance
	// call returns, so the handout's own transition can come a moment after Acquire.
	// When the map registered first, the handout finds the instance ready already and
	// only its reason changes (ready→ready is no transition).
	h.waitFor("handout from the pool", 5*time.Second, func() bool {
		cur, err := h.sup.Instance(id)
		return h.sawTransition(id, orchestrator.StateReady, "handed warm pool container") ||
			(err == nil && strings.Contains(cur.Reason, "handed warm pool container"))
	})
	// The container is renamed to the instance's name in the background; its labels
	// and environment (fixed at create) name its pool id, never an instance.
	var info container.InspectResponse
	h.waitFor("rename to the instance's name", 5*time.Second, func() bool {
		info = h.inspect(inst.ContainerID)
		return info.Name == "/"+docker.ContainerName(h.deployment, id)
	})
	poolID := info.Config.Labels[docker.LabelPool]
	if !mapgen.IsPoolID(poolID) || info.Config.Labels[docker.LabelInstance] != "" || info.Config.Labels[docker.LabelMap] != "" {
		t.Fatalf("handed-out container labels %v", info.Config.Labels)
	}
	for _, kv := range info.Config.Env {
		if strings.HasPrefix(kv, "MAP_INSTANCE_ID=") || strings.HasPrefix(kv, "MAP_MAP_ID=") {
			t.Fatalf("pool container environment names an instance: %s", kv)
		}
	}
	if !slices.Contains(info.Config.Env, mapcontract.EnvPoolID+"="+poolID) {
		t.Fatalf("pool container environment lacks %s=%s", mapcontract.EnvPoolID, poolID)
	}
	h.waitFor("pool refilled", 30*time.Second, func() bool { return h.sup.Pool().Ready == 1 })
	// The map took on the instance: it re-registers under it and keeps heartbeating,
	// so its last heartbeat moves on while it stays ready.
	beats := h.heartbeats(id)
	h.waitFor("heartbeats under the instance", 10*time.Second, func() bool { return h.heartbeats(id) >= beats+3 })
	if got, _ := h.sup.Instance(id); got.State != orchestrator.StateReady || !h.sup.Registered(id) {
		t.Fatalf("handed-out instance %+v registered=%v", got, h.sup.Registered(id))
	}
}

// TestSupervisor_LabelledByInstance checks that Docker users find every map by its
// instance, as `docker ps --filter label=io.mapyard.instance=<id>` asks: an operator's
// create gets a container of its own even with a ready pool, and a map handed out from
// the pool moves to one once it has had no players for Rehome.
func TestSupervisor_LabelledByInstance(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(s *supervise.Supervisor) { s.PoolSize, s.Rehome = 1, 1500*time.Millisecond })
	h.waitFor("pool ready", 30*time.Second, func() bool { return h.sup.Pool().Ready == 1 })
	ctx := context.Background()

	t.Run("ColdCreate", func(t *testing.T) {
		id := h.deployment + "-admin"
		if _, err := h.sup.Create(ctx, orchestrator.CreateInstance{InstanceID: id, MapID: "frontier", Cold: true}); err != nil {
			t.Fatal(err)
		}
		inst := h.waitState(id, orchestrator.StateReady, 30*time.Second)
		if h.sawTransition(id, orchestrator.StateReady, "handed warm pool container") {
			t.Fatal("an operator's create was handed the pool container")
		}
		h.requireLabelled(id, inst.ContainerID)
	})
	t.Run("Rehome", func(t *testing.T) {
		h.waitFor("pool ready", 30*time.Second, func() bool { return h.sup.Pool().Ready == 1 })
		id := h.deployment + "-lazy"
		h.create(id)
		handed, err := h.sup.Acquire(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		h.waitFor("rehome", 30*time.Second, func() bool {
			cur, err := h.sup.Instance(id)
			return err == nil && cur.State == orchestrator.StateReady && cur.ContainerID != handed.ContainerID &&
				h.sawTransition(id, orchestrator.StateRestarting, "moving from its warm-pool container")
		})
		cur, _ := h.sup.Instance(id)
		if cur.Restarts != 0 {
			t.Fatalf("a rehome counted as a restart: %+v", cur)
		}
		h.requireLabelled(id, cur.ContainerID)
		if _, err := h.cli.ContainerInspect(ctx, handed.ContainerID); err == nil {
			t.Fatal("the handed-out pool container was left behind")
		}
	})
}

// requireLabelled checks that the running containers labelled io.mapyard.instance=id
// are exactly cid, named after the instance, with MAP_INSTANCE_ID=id.
func (h *harness) requireLabelled(id, cid string) {
	h.tb.Helper()
	list, err := h.cli.ContainerList(context.Background(), container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", docker.LabelInstance+"="+id))})
	if err != nil {
		h.tb.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != cid || list[0].Names[0] != "/"+docker.ContainerName(h.deployment, id) {
		h.tb.Fatalf("containers labelled %s: %+v, want %s named %s", id, list, cid, docker.ContainerName(h.deployment, id))
	}
	if info := h.inspect(cid); !slices.Contains(info.Config.Env, "MAP_INSTANCE_ID="+id) {
		h.tb.Fatalf("container of %s lacks MAP_INSTANCE_ID=%s", id, id)
	}
}

// TestSupervisor_Create checks the admin create rules.
func TestSupervisor_Create(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	for name, r := range map[string]orchestrator.CreateInstance{
		"ErrBadID":        {InstanceID: "Bad", MapID: "forest"},
		"ErrPoolPrefix":   {InstanceID: "pool-x", MapID: "forest"},
		"ErrBadConfig":    {InstanceID: h.deployment + "-x", MapID: "forest", Config: []byte(`{`)},
		"ErrFaultEnvOff":  {InstanceID: h.deployment + "-x", MapID: "forest", Env: []string{"MAP_FAULT_FAIL_HEALTH=true"}},
		"ErrNotFaultEnv":  {InstanceID: h.deployment + "-x", MapID: "forest", Env: []string{"MAP_ORCH_URL=http://evil"}},
		"ErrDuplicateDef": {InstanceID: h.deployment + "-d", MapID: "forest"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := h.sup.Create(ctx, r)
			want := apierr.EBADREQUEST
			if name == "ErrDuplicateDef" {
				want = apierr.ECONFLICT
			}
			if code := apierr.Code(err); code != want {
				t.Fatalf("code %q (%v), want %q", code, err, want)
			}
		})
	}
}

// TestSupervisor_IdleStop stops a non-default instance without players cleanly after
// the idle time; the default instance keeps running.
func TestSupervisor_IdleStop(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(s *supervise.Supervisor) { s.IdleStop = 1500 * time.Millisecond })
	id := h.deployment + "-idle"
	h.create(id)
	h.waitState(id, orchestrator.StateReady, 30*time.Second)
	st := h.waitState(id, orchestrator.StateStopped, 15*time.Second)
	if !strings.Contains(st.Reason, "no players") || st.Restarts != 0 {
		t.Fatalf("stopped %+v, want an idle stop that is not a crash", st)
	}
	if def, _ := h.sup.Instance(h.deployment + "-d"); def.State != orchestrator.StateReady {
		t.Fatalf("default instance %+v, want it left running", def)
	}
}

// TestSupervisor_AdoptHandedOutBeforeRename covers an orchestrator that died right
// after handing out a pool container and before renaming it: the next supervisor asks
// the pool-named container's /health, adopts it for its instance without a restart,
// and renames it.
func TestSupervisor_AdoptHandedOutBeforeRename(t *testing.T) {
	t.Parallel()
	// The wanted set outlives the first supervisor in a real database, as in production.
	store := sqlite.NewDB(filepath.Join(t.TempDir(), "mapyard.db"))
	if err := store.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h := newHarness(t, func(s *supervise.Supervisor) { s.PoolSize, s.Store = 1, store })
	h.waitFor("pool ready", 30*time.Second, func() bool { return h.sup.Pool().Ready == 1 })
	id := h.deployment + "-w"
	h.create(id)
	inst := h.waitState(id, orchestrator.StateReady, 10*time.Second)
	ctx := context.Background()
	var info container.InspectResponse
	h.waitFor("rename", 5*time.Second, func() bool {
		info = h.inspect(inst.ContainerID)
		return info.Name == "/"+docker.ContainerName(h.deployment, id)
	})
	h.sup.Close()
	// Put the pool name back, as if the rename never happened.
	if err := h.cli.ContainerRename(ctx, inst.ContainerID, docker.PoolContainerName(h.deployment, info.Config.Labels[docker.LabelPool])); err != nil {
		t.Fatal(err)
	}

	opts := h.sup.Options
	opts.PoolSize = 0
	next := supervise.New(h.rt, h.sup.RPC, h.sup.Credentials, h.sup.Log, opts)
	next.Store = store
	if err := next.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Close() })
	got, err := next.Instance(id)
	if err != nil || got.ContainerID != inst.ContainerID || got.State != orchestrator.StateReady {
		t.Fatalf("after adoption: %+v %v, want ready on container %s", got, err, inst.ContainerID)
	}
	h.waitFor("rename after adoption", 5*time.Second, func() bool {
		return h.inspect(inst.ContainerID).Name == "/"+docker.ContainerName(h.deployment, id)
	})
	if now := h.inspect(inst.ContainerID); now.State.StartedAt != info.State.StartedAt {
		t.Fatal("adopted container was restarted")
	}
}

// TestSupervisor_StopKilledAfterGrace stops a map that ignores SIGTERM: the stop is
// completed by a kill once the grace period has passed, and is not counted as a crash.
func TestSupervisor_StopKilledAfterGrace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(s *supervise.Supervisor) {
		s.AllowFaultEnv = true
		s.StopGrace = time.Second
	})
	id := h.deployment + "-stubborn"
	h.create(id, "MAP_FAULT_IGNORE_SIGTERM=true")
	h.waitState(id, orchestrator.StateReady, 30*time.Second)
	start := time.Now()
	if err := h.sup.Stop(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	st, _ := h.sup.Instance(id)
	if st.State != orchestrator.StateStopped || st.Restarts != 0 {
		t.Fatalf("after stop: %+v", st)
	}
	if took < time.Second {
		t.Fatalf("stop took %s: SIGTERM was not ignored, the test proves nothing", took)
	}
	// The die event (exit 137 after the kill) may come after ContainerStop returned.
	h.waitFor("exit code of the kill", 5*time.Second, func() bool {
		st, _ = h.sup.Instance(id)
		return st.LastExitCode != nil && *st.LastExitCode == 137
	})
	if st.State != orchestrator.StateStopped || st.Restarts != 0 {
		t.Fatalf("kill after grace counted as a crash: %+v", st)
	}
}
