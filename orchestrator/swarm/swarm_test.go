package swarm_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
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
)

// testNetwork is the overlay network the tests' map services join.
const testNetwork = "mapyard-swarm-test"

var (
	swarmOnce sync.Once
	swarmErr  error
	// initialised: this test binary put the engine in Swarm mode, and leaves it at the
	// end; a Swarm that was there before is left as it was.
	initialised bool
	leaveCli    *client.Client
)

func TestMain(m *testing.M) {
	code := m.Run()
	if initialised {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := leaveCli.SwarmLeave(ctx, true); err != nil {
			fmt.Fprintf(os.Stderr, "leave the Swarm this test initialised: %v\n", err)
			code = 1
		}
		cancel()
	}
	os.Exit(code)
}

// swarmClient returns a client of the local engine in Swarm mode: a single-node Swarm
// is initialised (advertised on 127.0.0.1) when the engine is in none, and left when
// the tests end. An engine that cannot be put in Swarm mode skips the test, or fails it
// under MAPYARD_REQUIRE_DOCKER=1.
func swarmClient(tb testing.TB) *client.Client {
	tb.Helper()
	cli := dockertest.Client(tb)
	swarmOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		info, err := cli.Info(ctx)
		if err != nil {
			swarmErr = err
			return
		}
		if info.Swarm.LocalNodeState == swarm.LocalNodeStateInactive {
			leaveCli, err = client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
			if err != nil {
				swarmErr = err
				return
			}
			if _, err := cli.SwarmInit(ctx, swarm.InitRequest{ListenAddr: "127.0.0.1:2377", AdvertiseAddr: "127.0.0.1"}); err != nil {
				swarmErr = fmt.Errorf("docker swarm init: %w", err)
				return
			}
			initialised = true
		}
		_, swarmErr = mswarm.EnsureNetwork(ctx, cli, testNetwork)
	})
	if swarmErr != nil {
		if os.Getenv("MAPYARD_REQUIRE_DOCKER") == "1" {
			tb.Fatalf("the engine cannot run Swarm services: %v", swarmErr)
		}
		tb.Skipf("the engine cannot run Swarm services (set MAPYARD_REQUIRE_DOCKER=1 to fail instead): %v", swarmErr)
	}
	return cli
}

// newRuntime returns a Swarm runtime of a deployment of the test's own, whose services
// are all removed when the test ends.
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
		MemoryMB: 64, NanoCPUs: 500_000_000, PidsLimit: 64, Constraints: constraints, StopGrace: 2 * time.Second,
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
