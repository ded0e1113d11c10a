package swarm_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/supervise"
	mswarm "github.com/mapyard/mapyard/orchestrator/swarm"
)

// TestSupervisor_Swarm runs the supervisor over the Swarm runtime: the default map
// starts as a hardened one-replica service, registers and answers /health through its
// published ports; its task's container killed, the exit is seen and the map restarted
// as a new service; a second supervisor adopts the running service by its labels.
func TestSupervisor_Swarm(t *testing.T) {
	t.Parallel()
	rt, cli := newRuntime(t)
	root, err := keys.NewRoot(dockertest.RandomHex(t, 16))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	record := func(id string, to orchestrator.InstanceState, reason string) {
		mu.Lock()
		seen = append(seen, id+" "+string(to)+" "+reason)
		mu.Unlock()
	}
	saw := func(substr string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(seen, func(s string) bool { return strings.Contains(s, substr) })
	}
	def := rt.Template.Deployment + "-d"
	sup, closeSup := openSupervisor(t, rt, root, record)
	ready := func(sup *supervise.Supervisor, not string) orchestrator.Instance {
		t.Helper()
		var in orchestrator.Instance
		waitFor(t, def+" ready", 30*time.Second, func() bool {
			in, _ = sup.Instance(def)
			return in.State == orchestrator.StateReady && in.ContainerID != not
		})
		return in
	}
	first := ready(sup, "")
	ctx := context.Background()

	t.Run("HardenedService", func(t *testing.T) {
		svc, _, err := cli.ServiceInspectWithRaw(ctx, first.ContainerID, swarm.ServiceInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cs, tt := svc.Spec.TaskTemplate.ContainerSpec, svc.Spec.TaskTemplate
		if cs.User != docker.MapUser || !cs.ReadOnly || !slices.Equal(cs.CapabilityDrop, []string{"ALL"}) {
			t.Errorf("container spec user=%q readOnly=%v capDrop=%v", cs.User, cs.ReadOnly, cs.CapabilityDrop)
		}
		if tt.RestartPolicy == nil || tt.RestartPolicy.Condition != swarm.RestartPolicyConditionNone {
			t.Errorf("restart policy %+v, want none", tt.RestartPolicy)
		}
		if l := tt.Resources.Limits; l.Pids != 64 || l.MemoryBytes != 64<<20 || l.NanoCPUs != 500_000_000 {
			t.Errorf("limits %+v", l)
		}
		if r := svc.Spec.Mode.Replicated; r == nil || *r.Replicas != 1 {
			t.Errorf("mode %+v, want one replica", svc.Spec.Mode)
		}
		for k, want := range map[string]string{docker.LabelManaged: "true", docker.LabelDeployment: rt.Template.Deployment,
			docker.LabelInstance: def, docker.LabelMap: "default", mswarm.LabelRuns: def, docker.LabelImage: dockertest.MapImage()} {
			if svc.Spec.Labels[k] != want || (k != mswarm.LabelRuns && cs.Labels[k] != want) {
				t.Errorf("label %s: service %q, container %q, want %q", k, svc.Spec.Labels[k], cs.Labels[k], want)
			}
		}
		if first.GamePort == 0 {
			t.Fatal("no game port")
		}
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://127.0.0.1:" + strconv.Itoa(first.GamePort) + "/ws")
		if err != nil {
			t.Fatalf("the map's game listener does not answer on its published port: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("GET /ws without an upgrade: %d, want 400 from the map", resp.StatusCode)
		}
	})

	// Kill the task's container, as a crash would end it: the die event of the task's
	// container is the service's exit, and the map comes back on a new service.
	tasks, err := cli.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", first.ContainerID))})
	if err != nil || len(tasks) != 1 || tasks[0].Status.ContainerStatus == nil {
		t.Fatalf("tasks of the map's service: %+v, %v", tasks, err)
	}
	if err := cli.ContainerKill(ctx, tasks[0].Status.ContainerStatus.ContainerID, "KILL"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "restart after the kill", 10*time.Second, func() bool {
		return saw(def + " " + string(orchestrator.StateRestarting) + " container exited with code 137")
	})
	second := ready(sup, first.ContainerID)
	if _, _, err := cli.ServiceInspectWithRaw(ctx, first.ContainerID, swarm.ServiceInspectOptions{}); !errdefs.IsNotFound(err) {
		t.Errorf("the killed map's service was not removed: %v", err)
	}

	t.Run("AdoptedAfterRestart", func(t *testing.T) {
		closeSup()
		next, _ := openSupervisor(t, rt, root, record)
		in := ready(next, "")
		if in.ContainerID != second.ContainerID || in.Restarts != 0 {
			t.Fatalf("after an orchestrator restart: service %s restarts %d, want %s adopted", in.ContainerID, in.Restarts, second.ContainerID)
		}
	})
}

// mapEnv is the environment of a map started by the runtime alone: it runs and serves,
// and retries registering with an orchestrator that is not there.
func mapEnv(id string) []string {
	return []string{"MAP_ORCH_URL=http://127.0.0.1:1", "MAP_CREDENTIAL=" + strings.Repeat("c", 20),
		"MAP_ORCH_CREDENTIAL=" + strings.Repeat("o", 20), "MAP_INSTANCE_ID=" + id}
}

// TestRuntime_PoolAssignStopRemove starts a blank pool service, assigns it an
// instance (without touching its task), stops it cleanly and removes it.
func TestRuntime_PoolAssignStopRemove(t *testing.T) {
	t.Parallel()
	rt, cli := newRuntime(t)
	ctx := context.Background()
	pool := "pool-" + dockertest.RandomHex(t, 4)
	c, err := rt.Start(ctx, supervise.Spec{InstanceID: pool, Image: dockertest.MapImage(), Pool: true, Env: mapEnv(pool), Generation: "g1", KeyID: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Running || c.Ports.Control == 0 || c.Identity.InstanceID != pool {
		t.Fatalf("started %+v", c)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://127.0.0.1:" + strconv.Itoa(c.Ports.Control) + "/health")
	if err != nil {
		t.Fatalf("the map's control listener does not answer on its published port: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /health without a credential: %d, want 401", resp.StatusCode)
	}
	list := func() []supervise.Container {
		t.Helper()
		l, err := rt.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	t.Run("Assign", func(t *testing.T) {
		inst := "inst-" + dockertest.RandomHex(t, 4)
		if err := rt.Assign(ctx, c.ID, inst); err != nil {
			t.Fatal(err)
		}
		l := list()
		if len(l) != 1 || l[0].ID != c.ID || l[0].InstanceID != inst || !l[0].Pool || !l[0].Running || l[0].Identity.InstanceID != pool || l[0].Ports != c.Ports {
			t.Fatalf("after Assign: %+v, want %s running %s with its pool credentials", l, c.ID, inst)
		}
		tasks, err := cli.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", c.ID))})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("Assign touched the task: %d tasks, %v", len(tasks), err)
		}
	})
	t.Run("Stop", func(t *testing.T) {
		exit, err := rt.Stop(ctx, c.ID, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if exit.Code == -1 {
			t.Errorf("stop exit %+v, want the map's exit code", exit)
		}
		if l := list(); len(l) != 1 || l[0].Running {
			t.Fatalf("after Stop: %+v, want one stopped service", l)
		}
	})
	t.Run("Remove", func(t *testing.T) {
		if err := rt.Remove(ctx, c.ID); err != nil {
			t.Fatal(err)
		}
		if err := rt.Remove(ctx, c.ID); err != nil {
			t.Fatalf("removing a removed service: %v", err)
		}
		if l := list(); len(l) != 0 {
			t.Fatalf("after Remove: %+v", l)
		}
	})
}

// TestRuntime_ErrImageMissing: a task the node rejects for want of its image fails
// Start with ErrImageMissing, and no service is left.
func TestRuntime_ErrImageMissing(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	ctx := context.Background()
	_, err := rt.Start(ctx, supervise.Spec{InstanceID: "gone", Image: "mapyard/no-such-image:" + dockertest.RandomHex(t, 4), Env: mapEnv("gone")})
	if !errors.Is(err, supervise.ErrImageMissing) {
		t.Fatalf("Start: %v, want ErrImageMissing", err)
	}
	if l, err := rt.List(ctx); err != nil || len(l) != 0 {
		t.Fatalf("left behind: %+v, %v", l, err)
	}
}

// TestRuntime_ErrUnschedulable: a constraint no node satisfies fails Start at once
// with ErrUnschedulable naming the constraint, and no service is left.
func TestRuntime_ErrUnschedulable(t *testing.T) {
	t.Parallel()
	constraint := "node.labels.mapyard-test-" + dockertest.RandomHex(t, 2) + "==true"
	rt, _ := newRuntime(t, constraint)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := rt.Start(ctx, supervise.Spec{InstanceID: "nowhere", Image: dockertest.MapImage(), Env: mapEnv("nowhere")})
	if !errors.Is(err, supervise.ErrUnschedulable) || !strings.Contains(err.Error(), constraint) {
		t.Fatalf("Start: %v, want ErrUnschedulable naming %s", err, constraint)
	}
	if l, err := rt.List(context.Background()); err != nil || len(l) != 0 {
		t.Fatalf("left behind: %+v, %v", l, err)
	}
}
