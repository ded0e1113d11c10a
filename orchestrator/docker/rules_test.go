package docker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/apierr"
	"github.com/mapyard/mapyard/orchestrator/control"
)

// These tests drive the supervisor's rules over a fake engine and a fake clock; the
// Docker tests (supervise_test.go) show the same behaviour with real containers.

func TestRules_CrashesThenQuarantineThenRetry(t *testing.T) {
	f := newFakeSupervisor(t)
	f.ready(t)
	for i := 1; i <= 3; i++ {
		f.die(t, 3)
		inst, _ := f.Instance("d-1")
		if inst.State != orchestrator.StateStarting && inst.State != orchestrator.StateRestarting {
			t.Fatalf("after crash %d: %s (%s), want a restart", i, inst.State, inst.Reason)
		}
		if inst.Restarts != i {
			t.Fatalf("after crash %d: restarts %d", i, inst.Restarts)
		}
		f.clock.Add(time.Second)
		if err := f.MapReady(context.Background(), control.MapReady{InstanceID: "d-1"}); err != nil {
			t.Fatal(err)
		}
	}
	f.die(t, 3)
	inst, _ := f.Instance("d-1")
	if inst.State != orchestrator.StateQuarantined || inst.Restarts != 3 {
		t.Fatalf("after the 4th crash: %+v, want quarantined with 3 restarts", inst)
	}
	if _, err := f.Acquire(context.Background(), "d-1"); apierr.Code(err) != apierr.EMAPQUARANTINED {
		t.Fatalf("Acquire: %v, want map_quarantined", err)
	}
	creates := f.api.count("create")

	f.clock.Add(29 * time.Second)
	f.check(context.Background())
	if inst, _ := f.Instance("d-1"); inst.State != orchestrator.StateQuarantined || f.api.count("create") != creates {
		t.Fatalf("left quarantine early: %+v", inst)
	}
	f.clock.Add(time.Second)
	f.check(context.Background())
	f.settle(t)
	if !f.saw("quarantined→starting: quarantine over") || f.api.count("create") != creates+1 {
		t.Fatalf("not tried again after the quarantine; transitions %v", f.transitions)
	}
}

func TestRules_CleanExitIsNotACrash(t *testing.T) {
	f := newFakeSupervisor(t)
	f.ready(t)
	f.die(t, 0)
	inst, _ := f.Instance("d-1")
	if inst.Restarts != 0 || testutil.ToFloat64(f.Metrics.Exits.WithLabelValues("crash")) != 0 {
		t.Fatalf("clean exit counted: %+v", inst)
	}
	if !f.saw("ready→stopped: exited cleanly with code 0") {
		t.Fatalf("transitions %v", f.transitions)
	}
}

func TestRules_HeartbeatTimeout(t *testing.T) {
	f := newFakeSupervisor(t)
	f.HeartbeatTimeout = 15 * time.Second
	f.ready(t)
	f.clock.Add(10 * time.Second)
	if !f.Heartbeat("d-1", 0) {
		t.Fatal("registered map's heartbeat answered not registered")
	}
	f.clock.Add(14 * time.Second)
	f.check(context.Background())
	if inst, _ := f.Instance("d-1"); inst.State != orchestrator.StateReady {
		t.Fatalf("unhealthy before the timeout: %+v", inst)
	}
	f.clock.Add(2 * time.Second)
	f.check(context.Background())
	f.settle(t)
	if !f.saw("ready→unhealthy: no heartbeat for 16s") || !f.saw("unhealthy→restarting") {
		t.Fatalf("transitions %v", f.transitions)
	}
	if f.Heartbeat("d-1", 0) {
		t.Fatal("a replaced map's heartbeat must make it register again")
	}
}

func TestRules_ProbeFailures(t *testing.T) {
	f := newFakeSupervisor(t)
	f.ready(t)
	f.rpc.mu.Lock()
	f.rpc.err = errors.New("connection refused")
	f.rpc.mu.Unlock()
	f.check(context.Background())
	if inst, _ := f.Instance("d-1"); inst.State != orchestrator.StateReady {
		t.Fatalf("unhealthy after one failed probe: %+v", inst)
	}
	f.check(context.Background())
	f.settle(t)
	if !f.saw("ready→unhealthy: 2 health probes failed") {
		t.Fatalf("transitions %v", f.transitions)
	}
}

// TestRules_EventsResync loses the events stream while the map dies: the resync after
// reconnecting finds the exited container and restarts it.
func TestRules_EventsResync(t *testing.T) {
	f := newFakeSupervisor(t)
	inst := f.ready(t)
	calls := 0
	f.api.events = func(ctx context.Context) (<-chan events.Message, <-chan error) {
		calls++
		errs := make(chan error, 1)
		if calls == 1 {
			// The map dies while the stream is down: no die event is ever sent.
			f.api.mu.Lock()
			f.api.containers[inst.ContainerID].state = "exited"
			f.api.containers[inst.ContainerID].exitCode = 2
			f.api.mu.Unlock()
			errs <- errors.New("unexpected EOF")
		}
		return make(chan events.Message), errs
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.watchEvents(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for !f.saw("ready→restarting: container exited with code 2") {
		if time.Now().After(deadline) {
			t.Fatalf("exit not found by resync; transitions %v", f.transitions)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if got := testutil.ToFloat64(f.Metrics.EventsReconnects); got != 1 {
		t.Fatalf("reconnects %v, want 1", got)
	}
}

func TestRules_AdminRestartIsNotCounted(t *testing.T) {
	f := newFakeSupervisor(t)
	first := f.ready(t)
	if err := f.Restart(context.Background(), "d-1"); err != nil {
		t.Fatal(err)
	}
	f.settle(t)
	// The old container's die event, caused by the restart itself, is ignored.
	f.handleEvent(events.Message{Action: "die", Actor: events.Actor{ID: first.ContainerID, Attributes: map[string]string{"exitCode": "0"}}})
	inst, _ := f.Instance("d-1")
	if inst.Restarts != 0 || inst.ContainerID == first.ContainerID || inst.State != orchestrator.StateRestarting {
		t.Fatalf("after admin restart: %+v", inst)
	}
	if _, err := f.api.ContainerInspect(context.Background(), first.ContainerID); err == nil {
		t.Fatal("old container not removed")
	}
	list, _ := f.api.ContainerList(context.Background(), container.ListOptions{})
	if len(list) != 1 || !strings.HasSuffix(list[0].Names[0], "d-1") {
		t.Fatalf("containers %+v", list)
	}
}

// TestRules_StopWaitsForStart stops an instance whose start is still in flight: the stop
// waits for the start instead of failing with conflict.
func TestRules_StopWaitsForStart(t *testing.T) {
	f := newFakeSupervisor(t)
	f.Supervisor.mu.Lock()
	f.spawn(f.instances["d-1"], orchestrator.StateStarting, "test")
	f.Supervisor.mu.Unlock()
	if err := f.Stop(context.Background(), "d-1"); err != nil {
		t.Fatalf("stop during start: %v", err)
	}
	if inst, _ := f.Instance("d-1"); inst.State != orchestrator.StateStopped {
		t.Fatalf("after stop: %+v", inst)
	}
}

func TestRules_DockerEvents(t *testing.T) {
	t.Run("HealthStatusUnhealthy", func(t *testing.T) {
		f := newFakeSupervisor(t)
		inst := f.ready(t)
		f.handleEvent(events.Message{Action: "health_status: healthy", Actor: events.Actor{ID: inst.ContainerID}})
		if got, _ := f.Instance("d-1"); got.State != orchestrator.StateReady {
			t.Fatalf("healthy event changed state: %+v", got)
		}
		f.handleEvent(events.Message{Action: "health_status: unhealthy", Actor: events.Actor{ID: inst.ContainerID}})
		f.settle(t)
		if !f.saw("ready→unhealthy: docker health check reports unhealthy") || !f.saw("unhealthy→restarting") {
			t.Fatalf("transitions %v", f.transitions)
		}
	})
	t.Run("OOM", func(t *testing.T) {
		f := newFakeSupervisor(t)
		inst := f.ready(t)
		f.handleEvent(events.Message{Action: "oom", Actor: events.Actor{ID: inst.ContainerID}})
		f.die(t, 137)
		got, _ := f.Instance("d-1")
		if !got.OOMKilled || got.Restarts != 1 || !f.saw("killed by the kernel OOM killer") {
			t.Fatalf("after OOM: %+v; transitions %v", got, f.transitions)
		}
		if n := testutil.ToFloat64(f.Metrics.Exits.WithLabelValues("oom")); n != 1 {
			t.Fatalf("oom exits %v", n)
		}
	})
	t.Run("OldContainerIgnored", func(t *testing.T) {
		f := newFakeSupervisor(t)
		f.ready(t)
		f.handleEvent(events.Message{Action: "die", Actor: events.Actor{ID: "c-unknown", Attributes: map[string]string{"exitCode": "1"}}})
		if got, _ := f.Instance("d-1"); got.State != orchestrator.StateReady || got.Restarts != 0 {
			t.Fatalf("die of an unknown container changed the instance: %+v", got)
		}
	})
}

func TestRules_FailedStopLeavesInstanceStopped(t *testing.T) {
	f := newFakeSupervisor(t)
	f.ready(t)
	f.api.mu.Lock()
	f.api.stopErr = errors.New("engine busy")
	f.api.mu.Unlock()
	if err := f.Stop(context.Background(), "d-1"); err == nil {
		t.Fatal("Stop succeeded although the engine refused")
	}
	inst, _ := f.Instance("d-1")
	if inst.State != orchestrator.StateStopped || !strings.Contains(inst.Reason, "stop failed") || inst.ContainerID == "" {
		t.Fatalf("after a failed stop: %+v, want stopped with its container kept", inst)
	}
}

func TestRules_ReplacedContainerCannotRegister(t *testing.T) {
	f := newFakeSupervisor(t)
	f.ready(t)
	f.Supervisor.mu.Lock()
	in := f.instances["d-1"]
	in.busy, in.expectExit = true, in.ContainerID // being replaced: its stop is in flight
	f.Supervisor.mu.Unlock()
	err := f.MapReady(context.Background(), control.MapReady{InstanceID: "d-1"})
	if apierr.Code(err) != apierr.ECONFLICT {
		t.Fatalf("map-ready from the container being replaced: %v, want conflict", err)
	}
	f.Supervisor.mu.Lock()
	in.busy = false
	f.Supervisor.mu.Unlock()
}

func TestRules_StuckPoolMemberReplaced(t *testing.T) {
	f := newFakeSupervisor(t)
	f.StartTimeout = 30 * time.Second
	f.Supervisor.mu.Lock()
	f.pool["pool-stuck"] = &poolMember{id: "pool-stuck", containerID: "cstuck", started: true, startedAt: f.clock.Now()}
	f.Supervisor.mu.Unlock()
	f.clock.Add(29 * time.Second)
	f.check(context.Background())
	if f.Pool().Size != 1 {
		t.Fatal("a pool member still within its start timeout was dropped")
	}
	f.clock.Add(2 * time.Second)
	f.check(context.Background())
	if f.Pool().Size != 0 {
		t.Fatal("a pool member that never registered keeps its place")
	}
}
