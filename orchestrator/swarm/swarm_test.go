package swarm_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
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
// are all removed when the test ends. Its maps run on this node (the manager, where
// the test's images are) besides the constraints given.
func newRuntime(tb testing.TB, constraints ...string) (*mswarm.Runtime, *client.Client) {
	tb.Helper()
	cli := swarmClient(tb)
	if _, err := mswarm.EnsureNetwork(context.Background(), cli, testNetwork); err != nil {
		tb.Fatal(err)
	}
	deployment := "test-" + dockertest.RandomHex(tb, 4)
	tb.Cleanup(func() { removeServices(tb, cli, deployment) })
	return mswarm.NewRuntime(cli, mswarm.Template{
		Deployment: deployment, Network: testNetwork,
		MemoryMB: 64, NanoCPUs: 500_000_000, PidsLimit: 64, Constraints: append([]string{"node.role==manager"}, constraints...), StopGrace: 2 * time.Second,
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
