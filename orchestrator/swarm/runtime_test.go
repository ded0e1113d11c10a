package swarm_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/versions"

	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/supervise"
	mswarm "github.com/mapyard/mapyard/orchestrator/swarm"
	"github.com/mapyard/mapyard/orchestrator/swarm/swarmlab"
)

// TestRuntime_HardenedOverlay starts a map as the supervisor would: a hardened
// one-replica service with no restart policy of its own, labelled as a container would
// be, on the overlay network with no port published on any host, reached at its task's
// address there on the map's own ports.
func TestRuntime_HardenedOverlay(t *testing.T) {
	t.Parallel()
	rt, cli := newRuntime(t)
	ctx := context.Background()
	id := "inst-" + dockertest.RandomHex(t, 4)
	c, err := rt.Start(ctx, supervise.Spec{InstanceID: id, MapID: "default", Image: dockertest.MapImage(), Env: mapEnv(id), Generation: "g1"})
	if err != nil {
		t.Fatal(err)
	}
	svc, _, err := cli.ServiceInspectWithRaw(ctx, c.ID, swarm.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs, tt := svc.Spec.TaskTemplate.ContainerSpec, svc.Spec.TaskTemplate
	if cs.User != docker.MapUser || !cs.ReadOnly || !slices.Equal(cs.CapabilityDrop, []string{"ALL"}) || cs.Privileges == nil {
		t.Errorf("container spec user=%q readOnly=%v capDrop=%v privileges=%+v", cs.User, cs.ReadOnly, cs.CapabilityDrop, cs.Privileges)
	}
	// Engines before API 1.48 drop no-new-privileges from a service's spec
	// (docs/scale-out.md); the map still runs non-root with every capability dropped.
	if api := cli.ClientVersion(); versions.LessThan(api, "1.48") {
		t.Logf("engine API %s: Swarm keeps no no-new-privileges (set: %v)", api, cs.Privileges.NoNewPrivileges)
	} else if !cs.Privileges.NoNewPrivileges {
		t.Errorf("no-new-privileges not set on engine API %s", api)
	}
	if tt.RestartPolicy == nil || tt.RestartPolicy.Condition != swarm.RestartPolicyConditionNone {
		t.Errorf("restart policy %+v, want none", tt.RestartPolicy)
	}
	if h := cs.Healthcheck; h == nil || !slices.Equal(h.Test, []string{"NONE"}) {
		t.Errorf("health check %+v, want none of Swarm's own (the supervisor probes)", h)
	}
	if l := tt.Resources.Limits; l.Pids != 64 || l.MemoryBytes != 64<<20 || l.NanoCPUs != 500_000_000 {
		t.Errorf("limits %+v", l)
	}
	if r := svc.Spec.Mode.Replicated; r == nil || *r.Replicas != 1 {
		t.Errorf("mode %+v, want one replica", svc.Spec.Mode)
	}
	for k, want := range map[string]string{docker.LabelManaged: "true", docker.LabelDeployment: rt.Template.Deployment,
		docker.LabelInstance: id, docker.LabelMap: "default", mswarm.LabelRuns: id, docker.LabelImage: dockertest.MapImage()} {
		if svc.Spec.Labels[k] != want || (k != mswarm.LabelRuns && cs.Labels[k] != want) {
			t.Errorf("label %s: service %q, container %q, want %q", k, svc.Spec.Labels[k], cs.Labels[k], want)
		}
	}
	if e := svc.Spec.EndpointSpec; e == nil || len(e.Ports) != 0 || e.Mode != swarm.ResolutionModeDNSRR {
		t.Errorf("endpoint spec %+v, want no port and no virtual IP", e)
	}
	if len(svc.Endpoint.Ports) != 0 {
		t.Errorf("published ports %+v, want none", svc.Endpoint.Ports)
	}
	nw, err := mswarm.EnsureNetwork(ctx, cli, testNetwork)
	if err != nil {
		t.Fatal(err)
	}
	host, err := netip.ParseAddr(c.Ports.Host)
	if err != nil || !slices.ContainsFunc(nw.Subnets, func(p netip.Prefix) bool { return p.Contains(host) }) {
		t.Errorf("the map is reached at %q, want an address in the overlay's %v (%v)", c.Ports.Host, nw.Subnets, err)
	}
	if c.Ports.Node == "" {
		t.Error("no node reported")
	}
	want := supervise.Ports{Host: c.Ports.Host, Node: c.Ports.Node, Game: docker.MapGamePort, Control: docker.MapControlPort,
		GameAddr: net.JoinHostPort(c.Ports.Host, strconv.Itoa(docker.MapGamePort))}
	if c.Ports != want {
		t.Errorf("ports %+v, want %+v", c.Ports, want)
	}
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
	if !c.Running || c.Ports.Host == "" || c.Identity.InstanceID != pool {
		t.Fatalf("started %+v", c)
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

// TestRuntime_EventsOfAKilledTask: a map's task container killed, as a crash would end
// it, is an exit of its service, with the code, from the runtime's poll of tasks.
func TestRuntime_EventsOfAKilledTask(t *testing.T) {
	t.Parallel()
	rt, cli := newRuntime(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	id := "inst-" + dockertest.RandomHex(t, 4)
	c, err := rt.Start(ctx, supervise.Spec{InstanceID: id, Image: dockertest.MapImage(), Env: mapEnv(id)})
	if err != nil {
		t.Fatal(err)
	}
	events, errs := rt.Events(ctx)
	tasks, err := cli.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", c.ID))})
	if err != nil || len(tasks) != 1 || tasks[0].Status.ContainerStatus == nil {
		t.Fatalf("tasks of the map's service: %+v, %v", tasks, err)
	}
	if err := cli.ContainerKill(ctx, tasks[0].Status.ContainerStatus.ContainerID, "KILL"); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-events:
		if e.ContainerID != c.ID || e.Kind != supervise.EventExited || e.Exit.Code != 137 || e.Reason != "" {
			t.Fatalf("event %+v, want the exit of service %s with code 137", e, c.ID)
		}
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("no exit event within 10 s")
	}
}

// TestRuntime_ImageConstraints: the constraints of one image place its maps alone; a
// map of that image no node takes is ErrUnschedulable naming them.
func TestRuntime_ImageConstraints(t *testing.T) {
	t.Parallel()
	constraint := "node.labels.mapyard-test-" + dockertest.RandomHex(t, 2) + "==true"
	rt, cli := newRuntime(t)
	other := "mapyard/other-image:" + dockertest.RandomHex(t, 2)
	rt.Template.ImageConstraints = map[string][]string{dockertest.MapImage(): {constraint}, other: {"node.role==manager"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := rt.Start(ctx, supervise.Spec{InstanceID: "arena", Image: dockertest.MapImage(), Env: mapEnv("arena")})
	if !errors.Is(err, supervise.ErrUnschedulable) || !strings.Contains(err.Error(), constraint) {
		t.Fatalf("Start: %v, want ErrUnschedulable naming %s", err, constraint)
	}
	rt.Template.ImageConstraints = map[string][]string{other: {constraint}}
	c, err := rt.Start(ctx, supervise.Spec{InstanceID: "plain", Image: dockertest.MapImage(), Env: mapEnv("plain")})
	if err != nil {
		t.Fatalf("a map of an image without constraints: %v", err)
	}
	svc, _, err := cli.ServiceInspectWithRaw(ctx, c.ID, swarm.ServiceInspectOptions{})
	if err != nil || !slices.Equal(svc.Spec.TaskTemplate.Placement.Constraints, rt.Template.Constraints) {
		t.Fatalf("placement %+v, %v: want the deployment's constraints alone", svc.Spec.TaskTemplate.Placement, err)
	}
}

// TestRuntime_NodesAndPinning: the runtime lists the nodes that can take a map, a
// spare pinned to one runs there and says so, and a pin to a node that does not exist
// is ErrUnschedulable.
func TestRuntime_NodesAndPinning(t *testing.T) {
	t.Parallel()
	rt, cli := newRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes, err := rt.Nodes(ctx)
	info, ierr := cli.Info(ctx)
	if err != nil || ierr != nil || !slices.Contains(nodes, info.Swarm.NodeID) {
		t.Fatalf("Nodes: %v, %v; this node %q (%v)", nodes, err, info.Swarm.NodeID, ierr)
	}
	here := info.Swarm.NodeID
	pool := "pool-" + dockertest.RandomHex(t, 4)
	c, err := rt.Start(ctx, supervise.Spec{InstanceID: pool, Pool: true, Node: here, Image: dockertest.MapImage(), Env: mapEnv(pool)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Ports.Node != here {
		t.Fatalf("the spare runs on %q, want %q", c.Ports.Node, here)
	}
	_, err = rt.Start(ctx, supervise.Spec{InstanceID: "nowhere", Pool: true, Node: "nosuchnode" + dockertest.RandomHex(t, 2), Image: dockertest.MapImage(), Env: mapEnv("nowhere")})
	if !errors.Is(err, supervise.ErrUnschedulable) {
		t.Fatalf("a pin to no node: %v, want ErrUnschedulable", err)
	}
}

// TestRuntime_ImageOnOneNode: a map whose image only node 1 holds, sent first to node 2
// (it avoids node 1), is rejected there for want of its image and started on node 1:
// a map goes where its image is, and is image_missing only where no node has it.
func TestRuntime_ImageOnOneNode(t *testing.T) {
	t.Parallel()
	rt, cli := newRuntime(t)
	lab := swarmlab.Up(t)
	rt.Template.Constraints = nil // both nodes
	image := "mapyard/map-node1:" + dockertest.RandomHex(t, 3)
	dockertest.TagImage(t, cli, dockertest.MapImage(), image)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := rt.Start(ctx, supervise.Spec{InstanceID: "here", Image: image, Env: mapEnv("here"), Avoid: lab.Node1ID})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Running || c.Ports.Node != lab.Node1ID {
		t.Fatalf("started %+v, want it running on node 1 (%s), the one that holds its image", c, lab.Node1ID)
	}
	if l, err := rt.List(ctx); err != nil || len(l) != 1 {
		t.Fatalf("services left: %+v, %v; want the one that runs", l, err)
	}
}
