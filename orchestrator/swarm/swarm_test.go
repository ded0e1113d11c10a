package swarm_test

import (
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
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
// engine, besides the constraints given: node 2 has no map image unless a test loads
// it.
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
