package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/swarm/swarmlab"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// swarmKit is mapyard as compose/stack.yaml deploys it with `docker stack deploy` on
// the lab's two-node Swarm: the orchestrator and the edge as services on node 1, every
// map a service on either node, all on an overlay of the kit's own, with the kit's own
// stack name, network, deployment, public port and volumes, removed when the test ends.
// The test reaches it as a host and a player would: players through the edge's
// published port, the operator through `docker exec … /orchestrator admin`; and, to act
// as a map would, the control port's overlay address through a relay.
type swarmKit struct {
	lab                                *swarmlab.Lab
	stack, network, deployment, secret string
	// far and movable are the map image under two more names, each placed by its own
	// constraint (its label on a node), so a test decides where its maps go. Both
	// labels start on node 2 alone. A test adds a label to node 1 to let that image's
	// maps move there, and never removes a label under a running map: Swarm's
	// constraint enforcer would stop it.
	far, farLabel         string
	movable, movableLabel string
	// control is the control port's overlay address through a relay: the routes a
	// map calls, and the edge's (no admin route answers there).
	control string
	// public and ws are the edge's published port, as http:// and ws://.
	public, ws string
	dbPath     string
}

// newSwarmKit deploys the kit on the lab, node 2 holding the lab alone (the caller may
// kill it), and waits until the edge says the default map takes players. set changes
// the kit's mapyard.env: a variable to a value, or, set to "", back to its default.
func newSwarmKit(t testing.TB, set map[string]string) *swarmKit {
	t.Helper()
	dockertest.Client(t)
	lab := swarmlab.UpAlone(t)
	orchImage := dockertest.OrchestratorImage()
	dockertest.RequireImage(t, lab.Node1, orchImage)
	repo, tag, _ := strings.Cut(orchImage, ":")
	if repo != "mapyard/orchestrator" || tag == "" {
		t.Fatalf("MAPYARD_TEST_ORCH_IMAGE=%q: compose/stack.yaml runs mapyard/orchestrator:<tag>", orchImage)
	}
	hex := randomHex(t, 3)
	k := &swarmKit{lab: lab, stack: "sk" + hex, deployment: "sk-" + hex, secret: randomHex(t, 16),
		far: "mapyard/map-far:" + hex, farLabel: "mapyard.far-" + hex,
		movable: "mapyard/map-movable:" + hex, movableLabel: "mapyard.movable-" + hex}
	k.network = k.stack + "-maps"
	dockertest.TagImage(t, lab.Node1, dockertest.MapImage(), k.far)
	dockertest.TagImage(t, lab.Node1, dockertest.MapImage(), k.movable)
	lab.Load(t, dockertest.MapImage(), k.far, k.movable)
	k.label(t, lab.Node1ID, "mapyard.orchestrator", "true")
	for _, l := range []string{k.farLabel, k.movableLabel} {
		k.label(t, lab.Node2ID, l, "yes")
		t.Cleanup(func() { k.label(t, lab.Node1ID, l, ""); k.label(t, lab.Node2ID, l, "") })
	}

	dir := filepath.Join(t.TempDir(), "compose")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stack, err := os.ReadFile(filepath.Join(testutil.ModuleRoot(t), "compose", "stack.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"ORCH_DEPLOYMENT":          k.deployment,
		"ORCH_DEFAULT_INSTANCE_ID": k.deployment + "-d",
		"ORCH_INTERNAL_RPC_SECRET": k.secret,
		"ORCH_MAP_IMAGE":           dockertest.MapImage(),
		"ORCH_MAP_IMAGES":          dockertest.MapImage() + "," + k.far + "," + k.movable,
		// The kit's maps on node 1, the far and movable images' where their labels are.
		"ORCH_SWARM_IMAGE_CONSTRAINTS": dockertest.MapImage() + "=>" + swarmlab.Constraint(1) + ";" + k.far + "=>node.labels." + k.farLabel + "==yes;" +
			k.movable + "=>node.labels." + k.movableLabel + "==yes",
		"ORCH_WARM_POOL_SIZE":    "0",
		"ORCH_MAP_PROBE_MS":      "500",
		"ORCH_CHECKPOINT_MS":     "200",
		"ORCH_MAP_STOP_GRACE_MS": "3000",
		"MAP_HEARTBEAT_MS":       "300",
		"MAP_SNAPSHOT_PUSH_MS":   "200",
	}
	for name, v := range set {
		vars[name] = v
	}
	var env strings.Builder
	for name, v := range vars {
		if v != "" {
			fmt.Fprintf(&env, "%s=%s\n", name, v)
		}
	}
	for name, body := range map[string][]byte{"stack.yaml": stack, "mapyard.env": []byte(env.String())} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	port := testutil.FreePort(t)
	gid := socketGroup(t)
	t.Cleanup(func() { k.remove(t) })
	t.Cleanup(func() { // before the removal: what the kit said, when the test failed
		if !t.Failed() {
			return
		}
		for _, svc := range []string{"orchestrator", "edge"} {
			out, _ := exec.Command("docker", "service", "logs", "--tail", "80", k.stack+"_"+svc).CombinedOutput()
			t.Logf("docker service logs %s_%s:\n%s", k.stack, svc, out)
		}
	})
	k.docker(t, []string{"DOCKER_GID=" + gid, "MAPYARD_VERSION=" + tag, "MAPYARD_STACK=" + k.stack, "MAPYARD_NETWORK=" + k.network,
		"MAPYARD_PORT=" + strconv.Itoa(port)}, "stack", "deploy", "--resolve-image", "never", "-c", filepath.Join(dir, "stack.yaml"), k.stack)
	k.public = "http://127.0.0.1:" + strconv.Itoa(port)
	k.ws = "ws://127.0.0.1:" + strconv.Itoa(port)
	waitStatus(t, k.public+"/readyz", http.StatusOK, 2*time.Minute)
	k.control = "http://" + lab.Relay(t, k.network, k.stack+"_orchestrator:9000")
	vol, err := lab.Node1.VolumeInspect(context.Background(), k.stack+"_mapyard-data")
	if err != nil {
		t.Fatal(err)
	}
	k.dbPath = filepath.Join(vol.Mountpoint, "mapyard.db")
	return k
}

// docker runs the docker CLI with env added, failing the test with its output.
func (k *swarmKit) docker(t testing.TB, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// remove takes the kit down as `make down-swarm` does: the stack, then the maps'
// services, then its network and volumes once nothing uses them.
func (k *swarmKit) remove(t testing.TB) {
	cli := k.lab.Node1
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_ = exec.CommandContext(ctx, "docker", "stack", "rm", k.stack).Run()
	services, _ := cli.ServiceList(ctx, swarm.ServiceListOptions{Filters: filters.NewArgs(filters.Arg("label", docker.LabelDeployment+"="+k.deployment))})
	for _, s := range services {
		_ = cli.ServiceRemove(ctx, s.ID)
	}
	for ctx.Err() == nil {
		left, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "com.docker.stack.namespace="+k.stack))})
		maps, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", docker.LabelDeployment+"="+k.deployment))})
		if len(left)+len(maps) == 0 {
			break
		}
		for _, c := range append(left, maps...) {
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, v := range []string{k.stack + "_mapyard-data", k.stack + "_mapyard-edge", k.stack + "_mapyard-certs", k.stack + "_mapyard-assets"} {
		if err := cli.VolumeRemove(ctx, v, true); err != nil {
			t.Logf("cleanup: volume %s: %v", v, err)
		}
	}
	for ctx.Err() == nil {
		if err := cli.NetworkRemove(ctx, k.network); err == nil || strings.Contains(err.Error(), "not found") {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// label sets (or, with value "", removes) a node label.
func (k *swarmKit) label(t testing.TB, nodeID, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		node, _, err := k.lab.Node1.NodeInspectWithRaw(ctx, nodeID)
		if err != nil {
			t.Fatal(err)
		}
		if node.Spec.Labels == nil {
			node.Spec.Labels = map[string]string{}
		}
		if value == "" {
			delete(node.Spec.Labels, key)
		} else {
			node.Spec.Labels[key] = value
		}
		err = k.lab.Node1.NodeUpdate(ctx, nodeID, node.Version, node.Spec)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "out of sequence") || ctx.Err() != nil {
			t.Fatalf("label node %s: %v", nodeID, err)
		}
	}
}

// socketGroup is the group of the Docker socket, which the orchestrator runs in.
func socketGroup(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("stat", "-c", "%g", "/var/run/docker.sock").Output()
	if err != nil {
		t.Fatalf("stat the Docker socket: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// orchestratorContainer is the running container of the kit's orchestrator service.
func (k *swarmKit) orchestratorContainer(t testing.TB) string {
	t.Helper()
	var id string
	waitFor(t, "the orchestrator's container", time.Minute, func() bool {
		list, err := k.lab.Node1.ContainerList(context.Background(), container.ListOptions{Filters: filters.NewArgs(
			filters.Arg("label", "com.docker.swarm.service.name="+k.stack+"_orchestrator"), filters.Arg("status", "running"))})
		if err != nil || len(list) != 1 {
			return false
		}
		id = list[0].ID
		return true
	})
	return id
}

// admin calls the admin API as an operator of the kit does, with `docker exec
// <orchestrator> /orchestrator admin ARGS...`, and returns its exit code and output.
func (k *swarmKit) admin(t testing.TB, args ...string) (int, []byte) {
	t.Helper()
	cli := k.lab.Node1
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ex, err := cli.ContainerExecCreate(ctx, k.orchestratorContainer(t), container.ExecOptions{
		Cmd: append([]string{"/orchestrator", "admin"}, args...), AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	att, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close()
	var out, errOut bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errOut, att.Reader); err != nil {
		t.Fatal(err)
	}
	st, err := cli.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.ExitCode != 0 {
		return st.ExitCode, errOut.Bytes()
	}
	return 0, out.Bytes()
}

// instance is the orchestrator's view of instance id (ok=false while it does not
// answer, or knows no such instance).
func (k *swarmKit) instance(t testing.TB, id string) (orchestrator.Instance, bool) {
	t.Helper()
	var in orchestrator.Instance
	code, out := k.admin(t, "GET", httpapi.PathAdminMaps+"/"+id)
	if code != 0 {
		return in, false
	}
	if err := json.Unmarshal(out, &in); err != nil {
		t.Fatalf("admin GET %s: %v: %s", id, err, out)
	}
	return in, true
}

// waitInstance waits until instance id is in state st.
func (k *swarmKit) waitInstance(t testing.TB, id string, st orchestrator.InstanceState, timeout time.Duration) orchestrator.Instance {
	t.Helper()
	var in orchestrator.Instance
	waitFor(t, fmt.Sprintf("%s %s", id, st), timeout, func() bool {
		var ok bool
		in, ok = k.instance(t, id)
		return ok && in.State == st
	})
	return in
}

// createMap creates an instance of cfg running image (the kit's own when empty) and
// waits until it is ready.
func (k *swarmKit) createMap(t testing.TB, cfg mapgen.MapConfig, image string) orchestrator.Instance {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"instanceId":%q,"mapId":%q,"config":%s}`, cfg.InstanceID, cfg.MapID, raw)
	if image != "" {
		body = fmt.Sprintf(`{"instanceId":%q,"mapId":%q,"image":%q,"config":%s}`, cfg.InstanceID, cfg.MapID, image, raw)
	}
	if code, out := k.admin(t, "POST", httpapi.PathAdminMaps, body); code != 0 {
		t.Fatalf("admin create %s: exit %d: %s", cfg.InstanceID, code, out)
	}
	return k.waitInstance(t, cfg.InstanceID, orchestrator.StateReady, time.Minute)
}

// service is the Swarm service of instance id's current container.
func (k *swarmKit) service(t testing.TB, id string) swarm.Service {
	t.Helper()
	in, ok := k.instance(t, id)
	if !ok || in.ContainerID == "" {
		t.Fatalf("instance %s has no service: %+v", id, in)
	}
	svc, _, err := k.lab.Node1.ServiceInspectWithRaw(context.Background(), in.ContainerID, swarm.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// mapCred is the map credential instance id's service holds (MAP_CREDENTIAL): with it
// the test calls the control port as that map would.
func (k *swarmKit) mapCred(t testing.TB, id string) string {
	t.Helper()
	for _, kv := range k.service(t, id).Spec.TaskTemplate.ContainerSpec.Env {
		if v, ok := strings.CutPrefix(kv, "MAP_CREDENTIAL="); ok {
			return v
		}
	}
	t.Fatalf("instance %s's service has no MAP_CREDENTIAL", id)
	return ""
}

// nodeOf is the Swarm node that runs instance id's running task.
func (k *swarmKit) nodeOf(t testing.TB, id string) string {
	t.Helper()
	svc := k.service(t, id)
	tasks, err := k.lab.Node1.TaskList(context.Background(), swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", svc.ID))})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if task.Status.State == swarm.TaskStateRunning {
			return task.NodeID
		}
	}
	t.Fatalf("instance %s's service %s has no running task: %+v", id, svc.Spec.Name, tasks)
	return ""
}

// join asks the edge for a join ticket with body (a JoinRequest).
func (k *swarmKit) join(t testing.TB, body string) public.JoinResponse {
	t.Helper()
	var j public.JoinResponse
	testutil.PostJSON(t, k.public+public.PathJoin, "", body, http.StatusOK, &j)
	return j
}

// enterAtAs joins authKey's saved character through the edge and puts it on the map
// of cfg at (x, y) carrying attrs, as kit.enterAtAs does, over the control port's
// overlay address; then it plays through the edge. It returns the player and the
// join's rejoin credential.
func (k *swarmKit) enterAtAs(t testing.TB, authKey string, cfg mapgen.MapConfig, x, y float64, attrs string) (*client.Client, string) {
	t.Helper()
	j := k.join(t, fmt.Sprintf(`{"authKey":%q}`, authKey))
	a := transferAt(t, k.control, k.mapCred(t, j.InstanceID), j, cfg.MapID, x, y, attrs)
	return k.play(t, a.WS, a.Token), j.Rejoin
}

// play connects a player through the edge with a ticket or token to the map at ws
// path and waits for its first snapshot that shows it.
func (k *swarmKit) play(t testing.TB, path, token string) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), k.ws+path, client.Hello{Ticket: token}, client.Options{})
	if err != nil {
		t.Fatalf("enter %s: %v", path, err)
	}
	t.Cleanup(func() { c.Close() })
	waitUntil(t, "the first snapshot showing the player", func() bool { _, ok := c.State().SelfEntity(); return ok })
	return c
}

// backInPlay brings a player whose stream ended back with its session's rejoin
// credential, as the page and the Go client do (the join waits for its map), retrying
// until a snapshot shows it; *rejoin is kept current.
func (k *swarmKit) backInPlay(t testing.TB, rejoin *string) *client.Client {
	t.Helper()
	var back *client.Client
	waitFor(t, "the player back in play", time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		j, err := joinOnce(ctx, k.public, fmt.Sprintf(`{"rejoin":%q}`, *rejoin))
		if err != nil {
			t.Logf("rejoin: %v", err)
			time.Sleep(200 * time.Millisecond)
			return false
		}
		*rejoin = j.Rejoin
		cl, err := client.Dial(ctx, k.ws+j.WS, client.Hello{Ticket: j.Ticket}, client.Options{})
		if err != nil {
			t.Logf("enter %s: %v", j.InstanceID, err)
			time.Sleep(200 * time.Millisecond)
			return false
		}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if _, ok := cl.State().SelfEntity(); ok {
				back = cl
				return true
			}
			time.Sleep(20 * time.Millisecond)
		}
		cl.Close()
		return false
	})
	t.Cleanup(func() { back.Close() })
	return back
}

// availability sets a node's availability (active, pause, drain).
func (k *swarmKit) availability(t testing.TB, nodeID string, a swarm.NodeAvailability) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		node, _, err := k.lab.Node1.NodeInspectWithRaw(ctx, nodeID)
		if err != nil {
			t.Fatal(err)
		}
		node.Spec.Availability = a
		err = k.lab.Node1.NodeUpdate(ctx, nodeID, node.Version, node.Spec)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "out of sequence") || ctx.Err() != nil {
			t.Fatalf("node %s availability %s: %v", nodeID, a, err)
		}
	}
}

// logEvent is one line of the orchestrator's JSON log.
type logEvent struct {
	Time     time.Time `json:"time"`
	Msg      string    `json:"msg"`
	Instance string    `json:"instance"`
	From, To string
	Reason   string   `json:"reason"`
	TookMs   *float64 `json:"tookMs"`
}

// logEvents are the orchestrator's log lines since start, read from its service's logs.
func (k *swarmKit) logEvents(since time.Time) ([]logEvent, error) {
	out, err := exec.Command("docker", "service", "logs", "--raw", "--since", since.Add(-time.Second).UTC().Format(time.RFC3339), k.stack+"_orchestrator").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("docker service logs: %w", err)
	}
	var list []logEvent
	for _, line := range strings.Split(string(out), "\n") {
		var e logEvent
		if json.Unmarshal([]byte(line), &e) == nil && !e.Time.Before(since) {
			list = append(list, e)
		}
	}
	return list, nil
}

// events are the orchestrator's log lines since start; tb fails when they cannot be
// read.
func (k *swarmKit) events(tb testing.TB, since time.Time) []logEvent {
	tb.Helper()
	list, err := k.logEvents(since)
	if err != nil {
		tb.Fatal(err)
	}
	return list
}

// timeline is what the orchestrator logged about instance id since start, one line an
// event with its time since start: where the time of a recovery went. It only goes to
// the test's log, so logs that cannot be read are a line of it, not a failure.
func (k *swarmKit) timeline(t testing.TB, id string, start time.Time) string {
	t.Helper()
	events, err := k.logEvents(start)
	if err != nil {
		return fmt.Sprintf("(no logs: %v)", err)
	}
	var b strings.Builder
	for _, e := range events {
		if e.Instance != id {
			continue
		}
		fmt.Fprintf(&b, "  +%6dms %s", e.Time.Sub(start).Milliseconds(), e.Msg)
		if e.To != "" {
			fmt.Fprintf(&b, " %s→%s", e.From, e.To)
		}
		if e.TookMs != nil {
			fmt.Fprintf(&b, " (took %.1f ms)", *e.TookMs)
		}
		if e.Reason != "" {
			fmt.Fprintf(&b, ": %s", e.Reason)
		}
		b.WriteString("\n")
	}
	return b.String()
}
