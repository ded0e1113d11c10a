package docker_test

import (
	"context"
	"testing"

	"github.com/docker/docker/api/types/network"

	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/supervise"
)

// TestEnsureNetwork checks the map network against the real engine: a new one is created
// with inter-container communication off; one left by an older version without that
// option is replaced together with that version's containers of this deployment, unless
// another container is on it (of another deployment, or one holding credentials), in
// which case it is kept and reported as not isolated.
func TestEnsureNetwork(t *testing.T) {
	cli := dockertest.Client(t)
	ctx := context.Background()
	ours, theirs := "test-"+dockertest.RandomHex(t, 4), "test-"+dockertest.RandomHex(t, 4)
	t.Cleanup(func() {
		dockertest.RemoveDeployment(t, cli, ours)
		dockertest.RemoveDeployment(t, cli, theirs)
	})
	newName := func() string {
		name := "mapyard-nettest-" + dockertest.RandomHex(t, 4)
		t.Cleanup(func() {
			// The containers first: a network with endpoints cannot be removed.
			dockertest.RemoveDeployment(t, cli, ours)
			dockertest.RemoveDeployment(t, cli, theirs)
			if err := cli.NetworkRemove(context.Background(), name); err != nil {
				t.Errorf("remove network %s: %v", name, err)
			}
		})
		return name
	}
	legacy := func(name string) string {
		created, err := cli.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Labels: map[string]string{docker.LabelManaged: "true"}})
		if err != nil {
			t.Fatal(err)
		}
		return created.ID
	}
	// run starts a map container of deployment on the network, of a version before
	// credentials when generation is empty; with credentials in its environment it keeps
	// running (and retrying an orchestrator that is not there).
	run := func(name, gateway, deployment, generation string) string {
		rt := docker.NewRuntime(cli, docker.Template{Network: name, Gateway: gateway,
			Deployment: deployment, MemoryMB: 64, NanoCPUs: 500_000_000, PidsLimit: 64})
		c, err := rt.Start(ctx, supervise.Spec{InstanceID: deployment + "-m", MapID: "default", Image: dockertest.MapImage(), Generation: generation,
			Env: []string{"MAP_CREDENTIAL=0123456789abcdef-x", "MAP_ORCH_CREDENTIAL=0123456789abcdef-x", "MAP_ORCH_URL=http://127.0.0.1:1"}})
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	isolated := func(id string) bool {
		nw, err := cli.NetworkInspect(ctx, id, network.InspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return nw.Options[docker.OptionICC] == "false"
	}

	t.Run("CreatedIsolated", func(t *testing.T) {
		nw, err := docker.EnsureNetwork(ctx, cli, newName(), ours)
		if err != nil {
			t.Fatal(err)
		}
		if !nw.Isolated || !isolated(nw.ID) || nw.Gateway == "" {
			t.Fatalf("network %+v: want inter-container communication off", nw)
		}
	})
	t.Run("LegacyReplacedWithOurContainers", func(t *testing.T) {
		name := newName()
		old := legacy(name)
		nw0, err := cli.NetworkInspect(ctx, old, network.InspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := run(name, nw0.IPAM.Config[0].Gateway, ours, "")
		nw, err := docker.EnsureNetwork(ctx, cli, name, ours)
		if err != nil {
			t.Fatal(err)
		}
		if nw.ID == old || !nw.Isolated || !isolated(nw.ID) {
			t.Fatalf("network %+v (old %s): want a new isolated one", nw, old)
		}
		if _, err := cli.ContainerInspect(ctx, c); err == nil {
			t.Fatal("this deployment's container on the old network was kept")
		}
	})
	t.Run("LegacyKeptWhileAnotherDeploymentRuns", func(t *testing.T) {
		name := newName()
		old := legacy(name)
		nw0, _ := cli.NetworkInspect(ctx, old, network.InspectOptions{})
		c := run(name, nw0.IPAM.Config[0].Gateway, theirs, "")
		nw, err := docker.EnsureNetwork(ctx, cli, name, ours)
		if err != nil {
			t.Fatal(err)
		}
		if nw.ID != old || nw.Isolated {
			t.Fatalf("network %+v: want the old one, reported not isolated", nw)
		}
		info, err := cli.ContainerInspect(ctx, c)
		if err != nil || !info.State.Running {
			t.Fatalf("the other deployment's container: %v", err)
		}
		dockertest.RemoveDeployment(t, cli, theirs)
	})
	t.Run("LegacyKeptWithContainersHoldingCredentials", func(t *testing.T) {
		// Adopted as they are, so the network they run on cannot go away under them.
		name := newName()
		old := legacy(name)
		nw0, _ := cli.NetworkInspect(ctx, old, network.InspectOptions{})
		c := run(name, nw0.IPAM.Config[0].Gateway, ours, "0123abcd")
		nw, err := docker.EnsureNetwork(ctx, cli, name, ours)
		if err != nil {
			t.Fatal(err)
		}
		if nw.ID != old || nw.Isolated {
			t.Fatalf("network %+v: want the old one, reported not isolated", nw)
		}
		if info, err := cli.ContainerInspect(ctx, c); err != nil || !info.State.Running {
			t.Fatalf("the container holding credentials: %v", err)
		}
	})
}
