package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	mapclient "github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/latency"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/swarm/swarmlab"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// The Swarm benchmarks (make bench-swarm) run the kit from compose/stack.yaml on the
// lab's two nodes, as TestSwarm_KitAcrossNodes does, and measure the targets of
// docs/benchmarks.md's Swarm rows.

// BenchmarkSwarmSpawn measures a map's spawn to ready through the kit (an operator's
// create: a new service, its task placed and started, the map registered and ready)
// against a raw `docker service create` of the same image to its task running, in
// pairs, interleaved; the target ratio of the medians is ≤ 1.25.
func BenchmarkSwarmSpawn(b *testing.B) {
	k := newSwarmKit(b, nil)
	var raw, kit latency.Recorder
	n := 0
	for b.Loop() {
		for range 5 {
			n++
			raw.Add(k.rawSpawn(b))
			kit.Add(k.kitSpawn(b, fmt.Sprintf("%s-s%d", k.deployment, n)))
		}
	}
	rm, km := raw.Quantile(0.5), kit.Quantile(0.5)
	b.ReportMetric(latency.Ms(rm), "raw-median-ms")
	b.ReportMetric(latency.Ms(km), "kit-median-ms")
	b.ReportMetric(float64(km)/float64(rm), "ratio")
}

// rawSpawn creates a bare service of the map image on node 1, on the kit's overlay,
// waits until its task runs and returns how long that took; the service is removed.
func (k *swarmKit) rawSpawn(tb testing.TB) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := k.lab.Node1
	one := uint64(1)
	start := time.Now()
	svc, err := cli.ServiceCreate(ctx, swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: "raw-" + randomHex(tb, 4)},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{Image: dockertest.MapImage(), Env: []string{ // it runs, serves, and retries a registration
				"MAP_ORCH_URL=http://127.0.0.1:1", "MAP_CREDENTIAL=" + strings.Repeat("c", 20),
				"MAP_ORCH_CREDENTIAL=" + strings.Repeat("o", 20), "MAP_INSTANCE_ID=raw"},
				// As the kit runs maps: without the image's health check, which Swarm
				// would wait for before calling the task running (5 s).
				Healthcheck: &container.HealthConfig{Test: []string{"NONE"}}},
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionNone},
			Placement:     &swarm.Placement{Constraints: []string{swarmlab.Constraint(1)}},
			Networks:      []swarm.NetworkAttachmentConfig{{Target: k.network}},
		},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &one}},
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR},
	}, swarm.ServiceCreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = cli.ServiceRemove(context.Background(), svc.ID) }()
	for {
		tasks, err := cli.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", svc.ID))})
		if err != nil {
			tb.Fatal(err)
		}
		for _, t := range tasks {
			switch t.Status.State {
			case swarm.TaskStateRunning:
				return time.Since(start)
			case swarm.TaskStateFailed, swarm.TaskStateRejected, swarm.TaskStateComplete:
				tb.Fatalf("the raw service's task ended %s: %s", t.Status.State, t.Status.Err)
			}
		}
		if ctx.Err() != nil {
			tb.Fatalf("the raw service's task does not run: %+v", tasks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kitSpawn creates map id through the admin API (a new service: the operator's create
// skips the warm pool) and returns the time from its creation to its ready state, as
// the orchestrator logged them; the map is stopped afterwards.
func (k *swarmKit) kitSpawn(tb testing.TB, id string) time.Duration {
	tb.Helper()
	since := time.Now()
	cfg := smallMap(tb, id)
	id = cfg.InstanceID
	k.createMap(tb, cfg, "")
	var created, ready time.Time
	waitFor(tb, id+"'s ready line", 30*time.Second, func() bool {
		for _, e := range k.events(tb, since) {
			switch {
			case e.Instance != id:
			case e.Msg == "map state" && e.To == string(orchestrator.StateStarting) && created.IsZero():
				created = e.Time
			case e.Msg == "map state" && e.To == string(orchestrator.StateReady):
				ready = e.Time
			}
		}
		return !created.IsZero() && !ready.IsZero()
	})
	if code, out := k.admin(tb, "POST", "/admin/maps/"+id+"/stop"); code != 0 {
		tb.Fatalf("stop %s: %s", id, out)
	}
	return ready.Sub(created)
}

// BenchmarkSwarmHandout measures warm-pool handouts on Swarm (the pool keeps a spare
// on each node): a small map's task container is killed and its restart takes a spare,
// on whichever node; the figure is the handout (start-instance on the spare, which
// builds the map's world) as the orchestrator times it. The target p99 is ≤ 20 ms.
func BenchmarkSwarmHandout(b *testing.B) {
	k := newSwarmKit(b, map[string]string{"ORCH_WARM_POOL_SIZE": "1", "ORCH_SWARM_IMAGE_CONSTRAINTS": "",
		"ORCH_MAP_RESTART_MAX_IN_WINDOW": "1000"})
	m := smallMap(b, k.deployment+"-h")
	k.createMap(b, m, "")
	id := m.InstanceID
	var d latency.Recorder
	nodes := map[string]int{}
	for b.Loop() {
		for range 10 {
			waitFor(b, "a spare on each node", time.Minute, func() bool { return k.metric(b, "mapyard_warm_pool_ready") >= 2 })
			in := k.waitInstance(b, id, orchestrator.StateReady, time.Minute)
			since := time.Now()
			k.killTask(b, in.ContainerID)
			var took *float64
			waitFor(b, "the handout", 30*time.Second, func() bool {
				for _, e := range k.events(b, since) {
					if e.Instance == id && e.Msg == "warm pool handout" && e.TookMs != nil {
						took = e.TookMs
						return true
					}
				}
				return false
			})
			d.Add(time.Duration(*took * float64(time.Millisecond)))
			nodes[k.nodeOf(b, id)]++
		}
	}
	b.ReportMetric(latency.Ms(d.Quantile(0.5)), "handout-p50-ms")
	b.ReportMetric(latency.Ms(d.Quantile(0.99)), "handout-p99-ms")
	b.ReportMetric(float64(len(nodes)), "nodes-used")
}

// metric is the value of an unlabelled series of the orchestrator's /metrics.
func (k *swarmKit) metric(tb testing.TB, name string) float64 {
	tb.Helper()
	code, out := k.admin(tb, "GET", "/metrics")
	if code != 0 {
		return -1
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// killTask kills service id's running task container with SIGKILL, on its node.
func (k *swarmKit) killTask(tb testing.TB, serviceID string) {
	tb.Helper()
	tasks, err := k.lab.Node1.TaskList(context.Background(), swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", serviceID))})
	if err != nil {
		tb.Fatal(err)
	}
	for _, t := range tasks {
		if t.Status.State == swarm.TaskStateRunning && t.Status.ContainerStatus != nil {
			if err := k.engine(t.NodeID).ContainerKill(context.Background(), t.Status.ContainerStatus.ContainerID, "KILL"); err != nil {
				tb.Fatal(err)
			}
			return
		}
	}
	tb.Fatalf("service %s has no running task", serviceID)
}

// engine is the client of node id's engine.
func (k *swarmKit) engine(id string) *client.Client {
	if id == k.lab.Node2ID {
		return k.lab.Node2
	}
	return k.lab.Node1
}

// BenchmarkSwarmNodeLoss measures, with the default settings, how long the players of
// maps on a lost node take to play again: PLAYERS (default 20) players on two maps
// placed on node 2, whose engine is then killed with its containers; each player,
// when its stream ends or stalls, comes back with its rejoin credential, and the
// figure is the slowest one's time from the kill. The target is ≤ 10 s. The
// orchestrator's log of the first map says where the time went.
func BenchmarkSwarmNodeLoss(b *testing.B) {
	k := newSwarmKit(b, map[string]string{
		"ORCH_MAP_PROBE_MS": "", "ORCH_CHECKPOINT_MS": "", "ORCH_MAP_STOP_GRACE_MS": "", "MAP_HEARTBEAT_MS": "", "MAP_SNAPSHOT_PUSH_MS": "",
		"EDGE_JOIN_RATE_PER_MIN": "0", "EDGE_WS_RATE_PER_MIN": "0"})
	players := envInt(b, "PLAYERS", 20)
	var worst, median latency.Recorder
	round := 0
	for b.Loop() {
		round++
		k.lab.WaitNode2(b, swarm.NodeStateReady, 2*time.Minute)
		k.label(b, k.lab.Node1ID, k.farLabel, "")
		var maps []mapgen.MapConfig
		for i := range 2 {
			m := smallMap(b, fmt.Sprintf("%s-r%dm%d", k.deployment, round, i))
			m.Seed += uint64(i)
			k.createMap(b, m, k.far)
			maps = append(maps, m)
		}
		type player struct {
			c      *mapclient.Client
			rejoin string
		}
		ps := make([]player, players)
		for i := range ps {
			ps[i].c, ps[i].rejoin = k.enterAtAs(b, testutil.NewAuthKey(b), maps[i%2], float64(20+i), 20, `{}`)
		}
		k.label(b, k.lab.Node1ID, k.farLabel, "yes")
		lost := time.Now()
		k.lab.KillNode2(b)
		backs := make([]time.Duration, players)
		var wg sync.WaitGroup
		for i := range ps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				waitGone(ps[i].c, 30*time.Second)
				ps[i].c.Close()
				backs[i] = k.rejoinUntilPlaying(ps[i].rejoin, lost, 2*time.Minute)
			}()
		}
		wg.Wait()
		sort.Slice(backs, func(i, j int) bool { return backs[i] < backs[j] })
		b.Logf("round %d: %d players back after p50 %s, slowest %s; where the time went (map %s):\n%s", round, players,
			backs[len(backs)/2].Round(10*time.Millisecond), backs[len(backs)-1].Round(10*time.Millisecond), maps[0].InstanceID, k.timeline(b, maps[0].InstanceID, lost))
		worst.Add(backs[len(backs)-1])
		median.Add(backs[len(backs)/2])
		// The round's maps are stopped before the next round takes the far label off
		// node 1, which would have Swarm stop them there.
		for _, m := range maps {
			if code, out := k.admin(b, "POST", "/admin/maps/"+m.InstanceID+"/stop"); code != 0 {
				b.Fatalf("stop %s: %s", m.InstanceID, out)
			}
		}
		k.lab.StartNode2(b)
	}
	b.ReportMetric(latency.Ms(median.Quantile(0.5)), "back-p50-ms")
	b.ReportMetric(latency.Ms(worst.Quantile(0.5)), "back-slowest-ms")
}

// rejoinUntilPlaying rejoins with credential rejoin until a snapshot shows the player,
// and returns the time since from; a player not back within limit counts as limit.
func (k *swarmKit) rejoinUntilPlaying(rejoin string, from time.Time, limit time.Duration) time.Duration {
	for time.Since(from) < limit {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		j, err := joinOnce(ctx, k.public, fmt.Sprintf(`{"rejoin":%q}`, rejoin))
		if err == nil {
			rejoin = j.Rejoin
			if c, err := mapclient.Dial(ctx, k.ws+j.WS, mapclient.Hello{Ticket: j.Ticket}, mapclient.Options{}); err == nil {
				for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					if _, ok := c.State().SelfEntity(); ok {
						c.Close()
						cancel()
						return time.Since(from)
					}
				}
				c.Close()
			}
		}
		cancel()
		time.Sleep(100 * time.Millisecond)
	}
	return limit
}

// envInt is the benchmark setting name from the environment, or def.
func envInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// BenchmarkSwarmW1CrossNode measures workload W1 through the edge (on node 1) into a
// map on node 1 and into the same map on node 2, interleaved (node 1, node 2, three
// times), N bots (default 250) each; the figures are the medians of the map's CPU per
// player and its tick p99 on each node, and their ratios (node 2 ÷ node 1): the
// overlay's cost. The target is within 10 % (ratios ≤ 1.10).
func BenchmarkSwarmW1CrossNode(b *testing.B) {
	k := newSwarmKit(b, map[string]string{"EDGE_JOIN_RATE_PER_MIN": "0", "EDGE_WS_RATE_PER_MIN": "0"})
	n := envInt(b, "N", 250)
	warmup, window := os.Getenv("WARMUP"), os.Getenv("WINDOW")
	if warmup == "" {
		warmup = "10s"
	}
	if window == "" {
		window = "30s"
	}
	bots := filepath.Join(testutil.ModuleRoot(b), "bin", "mapbots")
	if _, err := os.Stat(bots); err != nil {
		b.Fatalf("%s: %v (make build)", bots, err)
	}
	raw, err := os.ReadFile(filepath.Join(testutil.ModuleRoot(b), "scripts", "bench", "w1-map.json"))
	if err != nil {
		b.Fatal(err)
	}
	cpu := map[int]*latency.Recorder{1: {}, 2: {}} // CPU % per player, as durations of µs
	tick := map[int]*latency.Recorder{1: {}, 2: {}}
	run := 0
	for b.Loop() {
		for _, node := range []int{1, 2, 1, 2, 1, 2} {
			run++
			var cfg mapgen.MapConfig
			if err := json.Unmarshal(raw, &cfg); err != nil {
				b.Fatal(err)
			}
			cfg.InstanceID = fmt.Sprintf("%s-w%d", k.deployment, run)
			image := ""
			if node == 2 {
				k.label(b, k.lab.Node1ID, k.farLabel, "")
				image = k.far
			}
			k.createMap(b, cfg, image)
			if got := k.nodeOf(b, cfg.InstanceID); got != map[int]string{1: k.lab.Node1ID, 2: k.lab.Node2ID}[node] {
				b.Fatalf("W1's map runs on %s, want node %d", got, node)
			}
			r := k.w1(b, bots, cfg, n, warmup, window)
			b.Logf("W1 N=%d, map on node %d: map CPU %.1f%% (%.3f%% a player), tick p99 %.2f ms, %.2f snapshots/s, drops %d",
				n, node, r.Server.CPUPercent, r.Server.CPUPercent/float64(n), r.Server.TickP99Ms, r.Bots.SnapshotsPerSec, r.Bots.Dropped+r.Server.DroppedClients)
			cpu[node].Add(time.Duration(r.Server.CPUPercent / float64(n) * 1e6))
			tick[node].Add(time.Duration(r.Server.TickP99Ms * 1e6))
			if code, out := k.admin(b, "POST", "/admin/maps/"+cfg.InstanceID+"/stop"); code != 0 {
				b.Fatalf("stop %s: %s", cfg.InstanceID, out)
			}
		}
	}
	c1, c2 := cpu[1].Quantile(0.5), cpu[2].Quantile(0.5)
	t1, t2 := tick[1].Quantile(0.5), tick[2].Quantile(0.5)
	b.ReportMetric(float64(c1)/1e6, "node1-cpu%/player")
	b.ReportMetric(float64(c2)/1e6, "node2-cpu%/player")
	b.ReportMetric(float64(c2)/float64(c1), "cpu-ratio")
	b.ReportMetric(float64(t1)/1e6, "node1-tick-p99-ms")
	b.ReportMetric(float64(t2)/1e6, "node2-tick-p99-ms")
	b.ReportMetric(float64(t2)/float64(t1), "tick-ratio")
}

// w1Report is the part of mapbots' -json report the W1 benchmark reads.
type w1Report struct {
	Server struct {
		CPUPercent     float64 `json:"cpuPercent"`
		TickP99Ms      float64 `json:"tickP99Ms"`
		DroppedClients int     `json:"droppedClients"`
	} `json:"server"`
	Bots struct {
		SnapshotsPerSec float64 `json:"snapshotsPerSec"`
		Dropped         int     `json:"dropped"`
	} `json:"bots"`
}

// w1 runs mapbots: n bots saved on cfg's map (as the default map, over the control
// port's overlay address) join and play through the edge; the map's CPU is read from
// its process, its tick times from its /metrics through a relay to its overlay
// address.
func (k *swarmKit) w1(tb testing.TB, bots string, cfg mapgen.MapConfig, n int, warmup, window string) w1Report {
	tb.Helper()
	svc := k.service(tb, cfg.InstanceID)
	var task swarm.Task
	tasks, err := k.lab.Node1.TaskList(context.Background(), swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", svc.ID))})
	if err != nil {
		tb.Fatal(err)
	}
	for _, t := range tasks {
		if t.Status.State == swarm.TaskStateRunning && t.Status.ContainerStatus != nil {
			task = t
		}
	}
	info, err := k.engine(task.NodeID).ContainerInspect(context.Background(), task.Status.ContainerStatus.ContainerID)
	if err != nil {
		tb.Fatal(err)
	}
	in, _ := k.instance(tb, cfg.InstanceID)
	metrics := k.lab.Relay(tb, k.network, strings.Replace(in.GameAddr, ":"+strconv.Itoa(docker.MapGamePort), ":"+strconv.Itoa(docker.MapControlPort), 1))
	root, err := keys.NewRoot(k.secret)
	if err != nil {
		tb.Fatal(err)
	}
	l := svc.Spec.TaskTemplate.ContainerSpec.Labels
	orchCred, err := root.OrchCredential(keys.Identity{InstanceID: l[docker.LabelInstance], Generation: l[docker.LabelGeneration]})
	if err != nil {
		tb.Fatal(err)
	}
	edgePid := k.servicePid(tb, k.stack+"_edge")
	cmd := exec.Command(bots, "-json", "-join", k.public, "-n", strconv.Itoa(n), "-warmup", warmup, "-window", window,
		"-spread", k.control, "-into", cfg.InstanceID, "-into-map", cfg.MapID,
		"-server-pid", strconv.Itoa(info.State.Pid), "-metrics", "http://"+metrics+"/metrics", "-edge-pid", strconv.Itoa(edgePid))
	cmd.Env = append(os.Environ(), "MAP_CREDENTIAL="+k.mapCred(tb, k.deployment+"-d"), "MAP_ORCH_CREDENTIAL="+orchCred)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("mapbots: %v\n%s", err, stderr.String())
	}
	var r w1Report
	if err := json.Unmarshal(out, &r); err != nil {
		tb.Fatalf("mapbots' report: %v: %s", err, out)
	}
	return r
}

// servicePid is the host pid of the kit's service name's running container (node 1).
func (k *swarmKit) servicePid(tb testing.TB, name string) int {
	tb.Helper()
	list, err := k.lab.Node1.ContainerList(context.Background(), container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", "com.docker.swarm.service.name="+name), filters.Arg("status", "running"))})
	if err != nil || len(list) != 1 {
		tb.Fatalf("the running container of %s: %v, %v", name, list, err)
	}
	info, err := k.lab.Node1.ContainerInspect(context.Background(), list[0].ID)
	if err != nil {
		tb.Fatal(err)
	}
	return info.State.Pid
}
