package supervise

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
)

// These tests drive the supervisor's rules over the fake runtime and a settable clock;
// the Docker tests (orchestrator/docker) show the same behaviour with real containers.

func TestRules_CrashRestartsThenQuarantineThenRelease(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	r.ready(t, "d-1")
	for i := 1; i <= 3; i++ {
		old := r.state("d-1").ContainerID
		r.rt.exit(old, Exit{Code: 3})
		r.waitFor(t, "restart on a new container", func() bool {
			inst := r.state("d-1")
			return inst.Restarts == i && inst.ContainerID != "" && inst.ContainerID != old
		})
		if inst := r.state("d-1"); inst.State != orchestrator.StateRestarting {
			t.Fatalf("after crash %d: %s (%s), want restarting", i, inst.State, inst.Reason)
		}
		if r.rt.exists(old) {
			t.Fatalf("crashed container %s not removed", old)
		}
		r.clock.Add(time.Second)
		r.ready(t, "d-1")
	}
	starts := r.rt.count("start")
	r.rt.exit(r.state("d-1").ContainerID, Exit{Code: 3})
	r.waitFor(t, "quarantine after the 4th crash", func() bool { return r.state("d-1").State == orchestrator.StateQuarantined })
	if inst := r.state("d-1"); inst.Restarts != 3 || !strings.Contains(inst.Reason, "3 restarts within 1m0s") {
		t.Fatalf("quarantined %+v, want 3 restarts and the reason", inst)
	}
	t.Run("ErrMapQuarantined", func(t *testing.T) {
		if _, err := r.Acquire(ctx, "d-1"); apierr.Code(err) != apierr.EMAPQUARANTINED {
			t.Fatalf("Acquire: %v, want map_quarantined", err)
		}
		if _, err := r.Gate("d-1"); apierr.Code(err) != apierr.EMAPQUARANTINED {
			t.Fatalf("Gate: %v, want map_quarantined", err)
		}
	})
	t.Run("HeldForTheQuarantine", func(t *testing.T) {
		r.clock.Add(29 * time.Second)
		r.check(ctx)
		if inst := r.state("d-1"); inst.State != orchestrator.StateQuarantined || r.rt.count("start") != starts {
			t.Fatalf("left quarantine early: %+v", inst)
		}
	})
	t.Run("ReleasedAfterTheQuarantine", func(t *testing.T) {
		r.clock.Add(time.Second)
		r.check(ctx)
		r.settle(t)
		if !r.saw("d-1 quarantined→starting: quarantine over") || r.rt.count("start") != starts+1 {
			t.Fatalf("not tried again after the quarantine: starts %d, want %d", r.rt.count("start"), starts+1)
		}
		// A fresh window: the next crash is restarted, not quarantined.
		r.ready(t, "d-1")
		r.rt.exit(r.state("d-1").ContainerID, Exit{Code: 3})
		r.waitFor(t, "restart after release", func() bool {
			return r.saw("d-1 ready→restarting: container exited with code 3") && r.state("d-1").Restarts == 4
		})
	})
	if got := testutil.ToFloat64(r.Metrics.Quarantines); got != 1 {
		t.Fatalf("quarantines %v, want 1", got)
	}
}

func TestRules_CleanStopIsNotACrash(t *testing.T) {
	r := newRig(t, nil)
	r.create(t, "b-1")
	t.Run("ExitCodeZero", func(t *testing.T) {
		first := r.ready(t, "b-1")
		starts := r.rt.count("start")
		r.rt.exit(first.ContainerID, Exit{Code: 0})
		r.waitFor(t, "stopped", func() bool { return r.state("b-1").State == orchestrator.StateStopped })
		inst := r.state("b-1")
		if inst.Restarts != 0 || testutil.ToFloat64(r.Metrics.Exits.WithLabelValues("crash")) != 0 || r.rt.count("start") != starts {
			t.Fatalf("clean exit counted or restarted: %+v", inst)
		}
		if !r.saw("b-1 ready→stopped: exited cleanly with code 0") {
			t.Fatal("no clean-exit transition")
		}
		if _, err := r.Gate("b-1"); apierr.Code(err) != apierr.EMAPUNAVAILABLE {
			t.Fatalf("Gate of a stopped map: %v, want map_unavailable", err)
		}
	})
	t.Run("AdminStop", func(t *testing.T) {
		// A join starts it again (lazy spawn), then an operator stops it.
		done := make(chan error, 1)
		go func() { _, err := r.Acquire(context.Background(), "b-1"); done <- err }()
		r.waitFor(t, "lazy start", func() bool {
			return r.state("b-1").State == orchestrator.StateStarting && r.state("b-1").ContainerID != ""
		})
		inst := r.ready(t, "b-1")
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := r.Stop(context.Background(), "b-1"); err != nil {
			t.Fatal(err)
		}
		// The exit the stop caused arrives after it: still not a crash.
		r.rt.events <- Event{ContainerID: inst.ContainerID, Kind: EventExited, Exit: Exit{Code: 137}}
		r.settle(t)
		if got := r.state("b-1"); got.State != orchestrator.StateStopped || got.Restarts != 0 {
			t.Fatalf("after admin stop: %+v", got)
		}
		if r.rt.exists(inst.ContainerID) {
			t.Fatal("stopped container not removed")
		}
	})
}

func TestRules_AdoptsRunningContainers(t *testing.T) {
	var def, handed, exited, ghost, pool string
	r := newRig(t, func(r *rig) {
		r.PoolSize = 1
		_ = r.store.PutInstance(context.Background(), orchestrator.WantedInstance{ID: "b-1", MapID: "frontier", Status: orchestrator.StatusRunning})
		def = r.rt.add("d-1", "d-1", false, true)
		// Handed out from the pool just before the last orchestrator died: pool-named,
		// but its map runs b-1.
		handed = r.rt.add(mapgen.PoolIDPrefix+"aa", "b-1", true, true)
		pool = r.rt.add(mapgen.PoolIDPrefix+"bb", mapgen.PoolIDPrefix+"bb", true, true)
		exited = r.rt.add("x-1", "x-1", false, false)
		ghost = r.rt.add("ghost-1", "ghost-1", false, true)
	})
	t.Run("SameContainerNoRestart", func(t *testing.T) {
		for id, cid := range map[string]string{"d-1": def, "b-1": handed} {
			inst := r.state(id)
			if inst.ContainerID != cid || inst.State != orchestrator.StateReady || inst.Restarts != 0 || inst.GamePort == 0 {
				t.Fatalf("%s: %+v, want ready on %s", id, inst, cid)
			}
		}
		if n := r.rt.count("start"); n != 0 {
			t.Fatalf("%d containers started, want none (the pool is full)", n)
		}
		r.waitFor(t, "handed-out container assigned", func() bool { return r.rt.count("assign") == 1 })
	})
	t.Run("RegistersAgain", func(t *testing.T) {
		if r.Heartbeat("d-1", "", 0) {
			t.Fatal("adopted map's heartbeat answered registered before it registered again")
		}
		r.ready(t, "d-1")
		if !r.Registered("d-1") {
			t.Fatal("not registered after map-ready")
		}
	})
	t.Run("PoolKept", func(t *testing.T) {
		if st := r.Pool(); st.Size != 1 || st.Ready != 0 {
			t.Fatalf("pool %+v, want the blank container kept, ready once it registers", st)
		}
		if err := r.MapReady(context.Background(), orchestrator.MapRegistration{InstanceID: mapgen.PoolIDPrefix + "bb"}); err != nil {
			t.Fatal(err)
		}
		if st := r.Pool(); st.Ready != 1 || !r.rt.exists(pool) {
			t.Fatalf("pool %+v after registration", st)
		}
	})
	t.Run("ExitedAndUnknownRemoved", func(t *testing.T) {
		r.waitFor(t, "removals", func() bool { return !r.rt.exists(exited) && !r.rt.exists(ghost) })
	})
}

func TestRules_PoolHandout(t *testing.T) {
	r := newRig(t, func(r *rig) { r.PoolSize = 1 })
	r.ready(t, "d-1")
	poolID := r.registeredPoolMember(t)
	if !r.Heartbeat(poolID, "", 0) || r.Pool().Ready != 1 {
		t.Fatalf("registered pool map not ready: %+v", r.Pool())
	}
	r.Supervisor.mu.Lock()
	poolContainer := r.pool[poolID].containerID
	r.Supervisor.mu.Unlock()

	r.create(t, "b-1")
	inst, err := r.Acquire(context.Background(), "b-1")
	if err != nil {
		t.Fatal(err)
	}
	if inst.ContainerID != poolContainer || !r.saw("b-1 starting→ready: handed warm pool container "+poolID) {
		t.Fatalf("b-1 %+v, want the pool container %s", inst, poolContainer)
	}
	r.waitFor(t, "assign and refill", func() bool { return r.rt.count("assign") == 1 && r.rt.count("start-pool") == 2 })
	if got := r.rt.count("start") - r.rt.count("start-pool"); got != 1 {
		t.Fatalf("%d instance containers started cold, want 1 (the default)", got)
	}
	if got := testutil.ToFloat64(r.Metrics.Handouts); got != 1 {
		t.Fatalf("handouts %v", got)
	}
}

// TestRules_StoppingMapIsNotAskedToRegister: a heartbeat from a map the supervisor is
// stopping (its SIGTERM not yet delivered) is answered registered, not "register
// again", which would have the map refused and, in the Node.js example, exit 1 before
// it saves its players; once stopped, the instance is no longer registered.
func TestRules_StoppingMapIsNotAskedToRegister(t *testing.T) {
	r := newRig(t, nil)
	r.ready(t, "d-1")
	r.create(t, "m-2")
	r.ready(t, "m-2")
	hold := make(chan struct{})
	r.rt.mu.Lock()
	r.rt.stopHold = hold
	r.rt.mu.Unlock()
	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop(context.Background(), "m-2") }()
	r.waitFor(t, "m-2 stopping", func() bool { return r.state("m-2").State == orchestrator.StateStopping })
	if !r.Heartbeat("m-2", "", 0) {
		t.Fatal("a map being stopped was told to register again")
	}
	close(hold)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if r.Heartbeat("m-2", "", 0) {
		t.Fatal("a stopped map's heartbeat answered registered")
	}
}

func TestRules_HeartbeatTimeout(t *testing.T) {
	r := newRig(t, func(r *rig) { r.HeartbeatTimeout = 15 * time.Second })
	r.ready(t, "d-1")
	r.clock.Add(10 * time.Second)
	if !r.Heartbeat("d-1", "", 0) {
		t.Fatal("registered map's heartbeat answered not registered")
	}
	r.clock.Add(14 * time.Second)
	r.check(context.Background())
	if inst := r.state("d-1"); inst.State != orchestrator.StateReady {
		t.Fatalf("unhealthy before the timeout: %+v", inst)
	}
	r.clock.Add(2 * time.Second)
	r.check(context.Background())
	r.settle(t)
	if !r.saw("ready→unhealthy: no heartbeat for 16s") || !r.saw("unhealthy→restarting") {
		t.Fatalf("transitions %v", r.transitions)
	}
	if r.Heartbeat("d-1", "", 0) {
		t.Fatal("a replaced map's heartbeat must make it register again")
	}
}

func TestRules_ProbeFailures(t *testing.T) {
	r := newRig(t, nil)
	r.ready(t, "d-1")
	r.rt.mu.Lock()
	r.rt.healthErr = errors.New("503")
	r.rt.mu.Unlock()
	// Within the grace after becoming ready the map is not probed at all.
	r.check(context.Background())
	r.check(context.Background())
	if inst := r.state("d-1"); inst.State != orchestrator.StateReady {
		t.Fatalf("probed within the grace: %+v", inst)
	}
	r.clock.Add(DefaultProbeGrace)
	r.check(context.Background())
	if inst := r.state("d-1"); inst.State != orchestrator.StateReady {
		t.Fatalf("unhealthy after one failed probe: %+v", inst)
	}
	r.check(context.Background())
	r.settle(t)
	if !r.saw("ready→unhealthy: 2 health probes failed") {
		t.Fatalf("transitions %v", r.transitions)
	}
}

// TestRules_HungProbeHoldsNoOtherMap: a map whose /health hangs (a stalled process, a
// node that swallows packets) is asked once and not again until it answers, while the
// rounds go on for the others: another map's failed probes make it unhealthy and a
// third map's missing heartbeats do, both while the first probe still hangs.
func TestRules_HungProbeHoldsNoOtherMap(t *testing.T) {
	r := newRig(t, func(r *rig) { r.HeartbeatTimeout = 15 * time.Second })
	r.ready(t, "d-1")
	for _, id := range []string{"m-2", "m-3"} {
		r.create(t, id)
		r.ready(t, id)
	}
	release := make(chan struct{})
	var once sync.Once
	answer := func() { once.Do(func() { close(release) }) }
	t.Cleanup(answer)
	r.rt.mu.Lock()
	r.rt.healthOf = map[string]func(context.Context) error{
		"d-1": func(ctx context.Context) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		"m-2": func(context.Context) error { return errors.New("503") },
		"m-3": func(context.Context) error { return nil },
	}
	r.rt.mu.Unlock()
	probed := func(id string) int {
		r.rt.mu.Lock()
		defer r.rt.mu.Unlock()
		return r.rt.calls["health "+id]
	}
	fails := func(id string) int {
		r.Supervisor.mu.Lock()
		defer r.Supervisor.mu.Unlock()
		return r.instances[id].probeFails
	}

	r.clock.Add(DefaultProbeGrace)
	hung := r.Supervisor.check(context.Background()) // d-1's probe never answers
	r.waitFor(t, "the first probes", func() bool { return probed("d-1") == 1 && fails("m-2") == 1 && probed("m-3") == 1 })
	r.clock.Add(16 * time.Second)
	for _, id := range []string{"d-1", "m-2"} { // m-3 stopped sending heartbeats
		if !r.Heartbeat(id, "", 0) {
			t.Fatalf("%s's heartbeat answered not registered", id)
		}
	}
	r.check(context.Background())
	r.settle(t)
	if !r.saw("m-2 ready→unhealthy: 2 health probes failed") || !r.saw("m-3 ready→unhealthy: no heartbeat for") {
		t.Fatalf("while d-1's probe hangs: transitions %v", r.transitions)
	}
	if n := probed("d-1"); n != 1 {
		t.Fatalf("d-1 probed %d times while its first probe hung, want 1", n)
	}
	if inst := r.state("d-1"); inst.State != orchestrator.StateReady {
		t.Fatalf("d-1 while its probe hangs: %+v", inst)
	}

	answer() // d-1 answers at last, and is asked again in the next round
	hung.Wait()
	r.check(context.Background())
	if n, f := probed("d-1"), fails("d-1"); n != 2 || f != 0 {
		t.Fatalf("after d-1 answered: probed %d times, %d failures; want 2 and 0", n, f)
	}
}

// TestRules_EventsResync loses the events stream while the map dies: the resync after
// reconnecting finds the exited container and restarts it.
func TestRules_EventsResync(t *testing.T) {
	r := newRig(t, nil)
	inst := r.ready(t, "d-1")
	lists := r.rt.count("list")
	r.rt.mu.Lock()
	r.rt.containers[inst.ContainerID].Running = false
	r.rt.containers[inst.ContainerID].Exit = Exit{Code: 2}
	r.rt.mu.Unlock()
	r.rt.errs <- errors.New("unexpected EOF")
	r.waitFor(t, "restart found by the resync", func() bool { return r.saw("d-1 ready→restarting: container exited with code 2") })
	if r.rt.count("list") <= lists || r.rt.count("events") < 2 {
		t.Fatalf("no reconnect and resync: lists %d, events %d", r.rt.count("list"), r.rt.count("events"))
	}
	if got := testutil.ToFloat64(r.Metrics.EventsReconnects); got != 1 {
		t.Fatalf("reconnects %v, want 1", got)
	}
}

func TestRules_AdminRestartIsNotCounted(t *testing.T) {
	r := newRig(t, nil)
	first := r.ready(t, "d-1")
	if err := r.Restart(context.Background(), "d-1"); err != nil {
		t.Fatal(err)
	}
	r.settle(t)
	// The old container's exit, caused by the restart itself, is ignored.
	r.handleEvent(Event{ContainerID: first.ContainerID, Kind: EventExited, Exit: Exit{Code: 0}})
	inst := r.state("d-1")
	if inst.Restarts != 0 || inst.ContainerID == first.ContainerID || inst.State != orchestrator.StateRestarting {
		t.Fatalf("after admin restart: %+v", inst)
	}
	if r.rt.exists(first.ContainerID) {
		t.Fatal("old container not removed")
	}
}

// TestRules_StopWaitsForStart stops an instance whose start is still in flight: the stop
// waits for the start instead of failing with conflict.
func TestRules_StopWaitsForStart(t *testing.T) {
	r := newRig(t, nil)
	r.create(t, "b-1")
	if err := r.Stop(context.Background(), "b-1"); err != nil {
		t.Fatalf("stop during start: %v", err)
	}
	if inst := r.state("b-1"); inst.State != orchestrator.StateStopped {
		t.Fatalf("after stop: %+v", inst)
	}
}

func TestRules_ContainerEvents(t *testing.T) {
	t.Run("Unhealthy", func(t *testing.T) {
		r := newRig(t, nil)
		inst := r.ready(t, "d-1")
		r.rt.events <- Event{ContainerID: inst.ContainerID, Kind: EventUnhealthy}
		r.waitFor(t, "restart", func() bool {
			return r.saw("ready→unhealthy: container health check reports unhealthy") && r.saw("unhealthy→restarting")
		})
	})
	t.Run("OOM", func(t *testing.T) {
		r := newRig(t, nil)
		inst := r.ready(t, "d-1")
		r.rt.exit(inst.ContainerID, Exit{Code: 137, OOM: true})
		r.waitFor(t, "restart", func() bool { return r.state("d-1").Restarts == 1 })
		if got := r.state("d-1"); !got.OOMKilled || !r.saw("killed by the kernel OOM killer") {
			t.Fatalf("after OOM: %+v", got)
		}
		if n := testutil.ToFloat64(r.Metrics.Exits.WithLabelValues("oom")); n != 1 {
			t.Fatalf("oom exits %v", n)
		}
	})
	t.Run("OldContainerIgnored", func(t *testing.T) {
		r := newRig(t, nil)
		r.ready(t, "d-1")
		r.handleEvent(Event{ContainerID: "c-unknown", Kind: EventExited, Exit: Exit{Code: 1}})
		if got := r.state("d-1"); got.State != orchestrator.StateReady || got.Restarts != 0 {
			t.Fatalf("exit of an unknown container changed the instance: %+v", got)
		}
	})
}

func TestRules_FailedStopLeavesInstanceStopped(t *testing.T) {
	r := newRig(t, nil)
	r.ready(t, "d-1")
	r.rt.mu.Lock()
	r.rt.stopErr = errors.New("engine busy")
	r.rt.mu.Unlock()
	if err := r.Stop(context.Background(), "d-1"); err == nil {
		t.Fatal("Stop succeeded although the runtime refused")
	}
	inst := r.state("d-1")
	if inst.State != orchestrator.StateStopped || !strings.Contains(inst.Reason, "stop failed") || inst.ContainerID == "" {
		t.Fatalf("after a failed stop: %+v, want stopped with its container kept", inst)
	}
}

func TestRules_ReplacedContainerCannotRegister(t *testing.T) {
	r := newRig(t, nil)
	r.ready(t, "d-1")
	r.Supervisor.mu.Lock()
	in := r.instances["d-1"]
	in.busy, in.expectExit = true, in.ContainerID // being replaced: its stop is in flight
	r.Supervisor.mu.Unlock()
	err := r.MapReady(context.Background(), orchestrator.MapRegistration{InstanceID: "d-1"})
	if apierr.Code(err) != apierr.ECONFLICT {
		t.Fatalf("map-ready from the container being replaced: %v, want conflict", err)
	}
	r.Supervisor.mu.Lock()
	in.busy = false
	r.Supervisor.mu.Unlock()
}

func TestRules_IdleStop(t *testing.T) {
	r := newRig(t, func(r *rig) { r.IdleStop = time.Minute; r.HeartbeatTimeout = time.Hour })
	r.ready(t, "d-1")
	r.create(t, "b-1")
	r.ready(t, "b-1")
	r.clock.Add(59 * time.Second)
	r.check(context.Background())
	if got := r.state("b-1"); got.State != orchestrator.StateReady {
		t.Fatalf("idle-stopped early: %+v", got)
	}
	r.clock.Add(2 * time.Second)
	r.check(context.Background())
	r.waitFor(t, "idle stop", func() bool { return r.state("b-1").State == orchestrator.StateStopped })
	if got := r.state("b-1"); got.Restarts != 0 || !strings.Contains(got.Reason, "no players for 1m0s") {
		t.Fatalf("idle stop %+v", got)
	}
	if got := r.state("d-1"); got.State != orchestrator.StateReady {
		t.Fatalf("default instance %+v, want it left running", got)
	}
}

func TestRules_StuckPoolMemberReplaced(t *testing.T) {
	r := newRig(t, func(r *rig) { r.StartTimeout = 30 * time.Second })
	// A running container (so a resync leaves it alone) whose blank map never registers.
	cid := r.rt.add("pool-stuck", "pool-stuck", true, true)
	r.Supervisor.mu.Lock()
	r.pool["pool-stuck"] = &poolMember{id: "pool-stuck", containerID: cid, started: true, startedAt: r.clock.Now()}
	r.Supervisor.mu.Unlock()
	r.clock.Add(29 * time.Second)
	r.check(context.Background())
	if r.Pool().Size != 1 {
		t.Fatal("a pool member still within its start timeout was dropped")
	}
	r.clock.Add(2 * time.Second)
	r.check(context.Background())
	if r.Pool().Size != 0 {
		t.Fatal("a pool member that never registered keeps its place")
	}
	r.waitFor(t, "stuck container removed", func() bool { return !r.rt.exists(cid) })
}

// TestRules_PooledMapRehomedWhenQuiet: a map handed out from the pool stays on its
// pool container while it has players, and moves to a container created for it (never
// the pool's) once it has had none for Rehome; the move is not a restart.
func TestRules_PooledMapRehomedWhenQuiet(t *testing.T) {
	r := newRig(t, func(r *rig) { r.PoolSize, r.Rehome, r.HeartbeatTimeout = 1, time.Minute, time.Hour })
	r.ready(t, "d-1")
	r.registeredPoolMember(t)
	r.create(t, "b-1")
	handed, err := r.Acquire(context.Background(), "b-1")
	if err != nil {
		t.Fatal(err)
	}
	r.settle(t)
	r.registeredPoolMember(t) // the refill: a rehome must not take it

	r.clock.Add(50 * time.Second)
	r.Heartbeat("b-1", "", 2) // players: the minute starts again
	r.clock.Add(50 * time.Second)
	r.check(context.Background())
	if got := r.state("b-1"); got.ContainerID != handed.ContainerID || got.State != orchestrator.StateReady {
		t.Fatalf("moved while it had players: %+v", got)
	}
	r.clock.Add(11 * time.Second)
	r.check(context.Background())
	r.waitFor(t, "rehome started", func() bool { return r.saw("b-1 ready→restarting: no players for 1m0s: moving") })
	got := r.ready(t, "b-1")
	if got.ContainerID == handed.ContainerID || got.Restarts != 0 || r.rt.exists(handed.ContainerID) {
		t.Fatalf("after rehome %+v (handed %s still there: %v)", got, handed.ContainerID, r.rt.exists(handed.ContainerID))
	}
	if r.Pool().Ready != 1 {
		t.Fatalf("the rehome took the pool container: %+v", r.Pool())
	}
	r.clock.Add(2 * time.Minute)
	r.check(context.Background())
	r.settle(t)
	if now := r.state("b-1"); now.ContainerID != got.ContainerID || now.State != orchestrator.StateReady {
		t.Fatalf("a map in a container of its own was moved again: %+v", now)
	}
}

// TestRules_ColdCreateSkipsPool: an operator's create (Cold) and restart start a
// container created for the instance even when a pool container is ready.
func TestRules_ColdCreateSkipsPool(t *testing.T) {
	r := newRig(t, func(r *rig) { r.PoolSize = 1 })
	r.ready(t, "d-1")
	r.registeredPoolMember(t)
	if _, err := r.Create(context.Background(), orchestrator.CreateInstance{InstanceID: "b-1", MapID: "frontier", Cold: true}); err != nil {
		t.Fatal(err)
	}
	r.ready(t, "b-1")
	if err := r.Restart(context.Background(), "b-1"); err != nil {
		t.Fatal(err)
	}
	r.ready(t, "b-1")
	if r.saw("handed warm pool container") || r.Pool().Ready != 1 {
		t.Fatalf("the pool container was handed out: pool %+v", r.Pool())
	}
}

// TestRules_RestartsOutliveTheSupervisor crashes the default map twice and opens a new
// supervisor over the same store, as an orchestrator restart does: it reports the two
// restarts, and counts on from them.
func TestRules_RestartsOutliveTheSupervisor(t *testing.T) {
	r := newRig(t, nil)
	r.ready(t, "d-1")
	for i := 1; i <= 2; i++ {
		old := r.state("d-1").ContainerID
		r.rt.exit(old, Exit{Code: 3})
		r.waitFor(t, "restart on a new container", func() bool {
			inst := r.state("d-1")
			return inst.Restarts == i && inst.ContainerID != "" && inst.ContainerID != old
		})
		r.clock.Add(time.Second)
		r.ready(t, "d-1")
	}
	r.waitFor(t, "the count stored", func() bool {
		w, _ := r.store.ListInstances(context.Background())
		return len(w) == 1 && w[0].Restarts == 2
	})
	r.Close()

	next := newRig(t, func(n *rig) { n.store, n.Store = r.store, r.store })
	if got := next.state("d-1").Restarts; got != 2 {
		t.Fatalf("a new supervisor reports %d restarts, want 2", got)
	}
	next.ready(t, "d-1")
	next.rt.exit(next.state("d-1").ContainerID, Exit{Code: 3})
	next.waitFor(t, "the third restart", func() bool { return next.state("d-1").Restarts == 3 })
}

// TestRules_ConfigRefusedUndoesCreate: a map whose game refuses its config at
// start-instance goes to config_refused with the game's reason, its container is
// removed and nothing restarts it; the admin create waiting in Settle gets
// map_config_refused and the instance and its wanted row are gone.
func TestRules_ConfigRefusedUndoesCreate(t *testing.T) {
	r := newRig(t, nil)
	r.ready(t, "d-1")
	ctx := context.Background()
	if _, err := r.Create(ctx, orchestrator.CreateInstance{InstanceID: "b-1", MapID: "frontier", Cold: true}); err != nil {
		t.Fatal(err)
	}
	r.settle(t)
	settled := make(chan error, 1)
	go func() {
		_, err := r.Settle(ctx, "b-1")
		settled <- err
	}()
	r.rt.mu.Lock()
	r.rt.refuse = "a tag arena is at most 400 m on a side"
	r.rt.mu.Unlock()
	cid := r.state("b-1").ContainerID
	if err := r.MapReady(ctx, orchestrator.MapRegistration{InstanceID: "b-1"}); apierr.Code(err) != apierr.EMAPCONFIGREFUSED {
		t.Fatalf("map-ready of a refused start: %v", err)
	}
	err := <-settled
	if apierr.Code(err) != apierr.EMAPCONFIGREFUSED || !strings.Contains(apierr.Message(err), "at most 400 m") {
		t.Fatalf("settle: %v, want map_config_refused with the game's reason", err)
	}
	if _, err := r.Instance("b-1"); apierr.Code(err) != apierr.ENOTFOUND {
		t.Fatalf("the refused instance is still known: %v", err)
	}
	if r.rt.exists(cid) {
		t.Fatalf("the refused map's container %s is left", cid)
	}
	w, _ := r.store.ListInstances(ctx)
	for _, wi := range w {
		if wi.ID == "b-1" {
			t.Fatalf("the refused instance's wanted row is left: %+v", wi)
		}
	}
	if !r.saw("b-1 starting→config_refused") {
		t.Fatalf("no transition to config_refused: %v", r.transitions)
	}
}

// TestRules_UnschedulableIsNotRetried: a map no node can place goes to unschedulable
// with the runtime's reason, is not retried by the probe rounds (no busy loop), fails
// joins at once with map_unavailable, and starts once an operator restarts it after the
// placement changed.
func TestRules_UnschedulableIsNotRetried(t *testing.T) {
	const picky = "studio/picky:1"
	r := newRig(t, func(r *rig) {
		r.Images = []string{picky}
		r.rt.unplaceable = map[string]bool{picky: true}
	})
	r.ready(t, "d-1")
	ctx := context.Background()
	if _, err := r.Create(ctx, orchestrator.CreateInstance{InstanceID: "p-1", MapID: "frontier", Image: picky, Cold: true}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "unschedulable", func() bool { return r.state("p-1").State == orchestrator.StateUnschedulable })
	starts := r.rt.count("start-image " + picky)
	for range 5 {
		r.clock.Add(time.Minute)
		r.check(ctx)
	}
	if inst := r.state("p-1"); inst.State != orchestrator.StateUnschedulable || inst.Restarts != 0 || r.rt.count("start-image "+picky) != starts ||
		!strings.Contains(inst.Reason, "mapyard.maps") {
		t.Fatalf("after probe rounds: %+v, %d starts (was %d)", inst, r.rt.count("start-image "+picky), starts)
	}
	if _, err := r.Acquire(ctx, "p-1"); apierr.Code(err) != apierr.EMAPUNAVAILABLE {
		t.Fatalf("a join to an unschedulable map: %v, want map_unavailable at once", err)
	}
	r.rt.mu.Lock()
	r.rt.unplaceable = nil
	r.rt.mu.Unlock()
	if err := r.Restart(ctx, "p-1"); err != nil {
		t.Fatal(err)
	}
	r.ready(t, "p-1")
}

// TestRules_LostContainerRestarts: a container the runtime reports lost (its Swarm node
// down or drained) is a failure even with a clean exit code, and the map restarts on a
// new container; the same report of a container being replaced anyway changes nothing.
func TestRules_LostContainerRestarts(t *testing.T) {
	r := newRig(t, nil)
	first := r.ready(t, "d-1")
	lost := Event{ContainerID: first.ContainerID, Kind: EventExited, Exit: Exit{Code: 0}, Reason: "its Swarm node node-2 (n2) is down"}
	r.handleEvent(lost)
	r.settle(t)
	inst := r.state("d-1")
	if inst.Restarts != 1 || inst.ContainerID == first.ContainerID || !strings.Contains(inst.Reason, "node-2") {
		t.Fatalf("after the loss: %+v, want one restart on a new container, saying why", inst)
	}
	r.handleEvent(lost)
	r.settle(t)
	if again := r.state("d-1"); again.Restarts != 1 || again.ContainerID != inst.ContainerID {
		t.Fatalf("a second report of the lost container: %+v", again)
	}
}
