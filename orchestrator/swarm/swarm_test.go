package swarm_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/supervise"
	mswarm "github.com/mapyard/mapyard/orchestrator/swarm"
	"github.com/mapyard/mapyard/orchestrator/swarm/swarmlab"
)

// testNetwork is the overlay network the tests' map services join.
const testNetwork = "mapyard-swarm-test"

// swarmClient returns a client of the Swarm lab's manager, the host's engine
// (swarmlab.Up: scripts/swarm-lab.sh brings up a second node beside it, and the lab
// stays up when the tests end).
func swarmClient(tb testing.TB) *client.Client {
	tb.Helper()
	dockertest.Client(tb) // the engine answers and has the map image, or the test skips
	return swarmlab.Up(tb).Node1
}

// newRuntime returns a Swarm runtime of a deployment of the test's own, whose services
// are all removed when the test ends. Its services are pinned to node 1, the host's
// engine: the tests reach their published ports on 127.0.0.1 and follow node 1's
// events, and node 2 has no map image unless a test loads it.
func newRuntime(tb testing.TB, constraints ...string) (*mswarm.Runtime, *client.Client) {
	tb.Helper()
	cli := swarmClient(tb)
	nw, err := mswarm.EnsureNetwork(context.Background(), cli, testNetwork)
	if err != nil {
		tb.Fatal(err)
	}
	deployment := "test-" + dockertest.RandomHex(tb, 4)
	tb.Cleanup(func() { removeServices(tb, cli, deployment) })
	return mswarm.NewRuntime(cli, mswarm.Template{
		Deployment: deployment, Network: testNetwork, Gateway: nw.Gateway,
		MemoryMB: 64, NanoCPUs: 500_000_000, PidsLimit: 64, Constraints: append([]string{swarmlab.Constraint(1)}, constraints...), StopGrace: 2 * time.Second,
	}), cli
}

// removeServices removes every service labelled with a test deployment.
func removeServices(tb testing.TB, cli *client.Client, deployment string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cli.ServiceList(ctx, swarm.ServiceListOptions{Filters: filters.NewArgs(filters.Arg("label", docker.LabelDeployment+"="+deployment))})
	if err != nil {
		tb.Logf("cleanup: %v", err)
	}
	for _, s := range list {
		if err := cli.ServiceRemove(ctx, s.ID); err != nil {
			tb.Logf("cleanup %s: %v", s.Spec.Name, err)
		}
	}
	dockertest.RemoveDeployment(tb, cli, deployment)
}

// openSupervisor runs a supervisor over rt with its control listener, closed by close
// or when the test ends (its map services are left running, as by an orchestrator that
// exits).
func openSupervisor(tb testing.TB, rt *mswarm.Runtime, root *keys.Root, transitions func(id string, to orchestrator.InstanceState, reason string)) (sup *supervise.Supervisor, close func()) {
	tb.Helper()
	log := slog.New(slog.NewTextHandler(dockertest.LogWriter{TB: tb}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts := supervise.DefaultOptions()
	opts.DefaultInstanceID, opts.DefaultMapID = rt.Template.Deployment+"-d", "default"
	opts.Image = dockertest.MapImage()
	opts.ProbeInterval = 200 * time.Millisecond
	opts.HeartbeatTimeout = 5 * time.Second
	opts.StartTimeout = 20 * time.Second
	opts.StopGrace = 2 * time.Second
	opts.OrphanGrace = 300 * time.Millisecond
	opts.PoolSize = 0
	sup = supervise.New(rt, mapcontract.NewMapClient(time.Second), root, log, opts)
	sup.OnTransition = func(id string, _, to orchestrator.InstanceState, reason string) { transitions(id, to, reason) }
	srv := httpapi.NewServer(sup, nil, nil, root, log)
	srv.Callers = sup
	srv.PublicAddr, srv.ControlAddr, srv.ControlExtraIPs = "127.0.0.1:0", "127.0.0.1:0", []string{rt.Template.Gateway}
	if err := srv.Open(); err != nil {
		tb.Fatal(err)
	}
	sup.Env = []string{
		fmt.Sprintf("MAP_ORCH_URL=http://%s:%d", docker.OrchestratorHost, srv.ControlPort()),
		"MAP_HEARTBEAT_MS=300",
	}
	if err := sup.Open(context.Background()); err != nil {
		tb.Fatal(err)
	}
	var once sync.Once
	close = func() {
		once.Do(func() {
			sup.Close()
			srv.Close(context.Background())
		})
	}
	tb.Cleanup(close)
	return sup, close
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(tb testing.TB, what string, timeout time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
