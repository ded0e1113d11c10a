package docker_test

import (
	"context"
	"errors"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/supervise"
)

func TestContainerNames(t *testing.T) {
	for _, c := range []struct{ deployment, id, want string }{
		{docker.DefaultDeployment, "forest-1", "mapyard-map-forest-1"},
		{"", "forest-1", "mapyard-map-forest-1"},
		{"staging", "forest-1", "mapyard-map-forest-1.staging"},
	} {
		name := docker.ContainerName(c.deployment, c.id)
		if name != c.want {
			t.Errorf("ContainerName(%q, %q) = %q, want %q", c.deployment, c.id, name, c.want)
		}
		if id, ok := docker.InstanceFromContainerName(c.deployment, "/"+name); !ok || id != c.id {
			t.Errorf("InstanceFromContainerName(%q, %q) = %q, %v", c.deployment, name, id, ok)
		}
	}
	if got := docker.PoolContainerName("staging", "pool-ab12"); got != "mapyard-pool-ab12.staging" {
		t.Errorf("pool container name %q", got)
	}
	// Another deployment's name is not an instance of this one.
	if id, ok := docker.InstanceFromContainerName("staging", "mapyard-map-forest-1.prod"); ok {
		t.Errorf("staging reads prod's container as its instance %q", id)
	}
	// A name from before deployment-scoped names is still read (its label says whose it is).
	if id, ok := docker.InstanceFromContainerName("staging", "mapyard-map-forest-1"); !ok || id != "forest-1" {
		t.Errorf("an unsuffixed name reads as %q, %v", id, ok)
	}
}

// TestRuntime_LeavesOtherDeploymentsAlone puts a container of another deployment on
// the very name a map of this one needs, and checks that the runtime refuses, with a
// message that says whose the container is, to start over it, hand a pool container
// its name, stop it or remove it: the container is still there, unchanged.
func TestRuntime_LeavesOtherDeploymentsAlone(t *testing.T) {
	cli := dockertest.Client(t)
	ctx := context.Background()
	mine, theirs := "test-"+dockertest.RandomHex(t, 4), "test-"+dockertest.RandomHex(t, 4)
	t.Cleanup(func() {
		dockertest.RemoveDeployment(t, cli, mine)
		dockertest.RemoveDeployment(t, cli, theirs)
	})
	mapNet, err := docker.EnsureNetwork(ctx, cli, "mapyard", mine)
	if err != nil {
		t.Fatal(err)
	}
	rt := docker.NewRuntime(cli, docker.Template{
		Network: "mapyard", Gateway: mapNet.Gateway, Deployment: mine,
		MemoryMB: 64, NanoCPUs: 500_000_000, PidsLimit: 64,
	})
	id := "forest-1"
	name := docker.ContainerName(mine, id)
	foreign, err := cli.ContainerCreate(ctx, &container.Config{Image: dockertest.MapImage(), Labels: map[string]string{
		docker.LabelManaged: "true", docker.LabelDeployment: theirs, docker.LabelInstance: id,
	}}, nil, nil, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	still := func(what string) {
		t.Helper()
		info, err := cli.ContainerInspect(ctx, name)
		if err != nil || info.ID != foreign.ID {
			t.Fatalf("after %s the other deployment's container %s is gone or replaced (%v)", what, foreign.ID[:12], err)
		}
	}

	_, err = rt.Start(ctx, supervise.Spec{InstanceID: id, MapID: "forest", Image: dockertest.MapImage()})
	if !errors.Is(err, docker.ErrNameTaken) {
		t.Fatalf("start over another deployment's container: %v, want ErrNameTaken", err)
	}
	t.Logf("start refused: %v", err)
	still("a start")
	if err := rt.Assign(ctx, "0123456789ab", id); !errors.Is(err, docker.ErrNameTaken) {
		t.Fatalf("assign the name of another deployment's container: %v, want ErrNameTaken", err)
	}
	still("an assign")
	if _, err := rt.Stop(ctx, foreign.ID, 0); !errors.Is(err, docker.ErrNotOwned) {
		t.Fatalf("stop another deployment's container: %v, want ErrNotOwned", err)
	}
	if err := rt.Remove(ctx, foreign.ID); !errors.Is(err, docker.ErrNotOwned) {
		t.Fatalf("remove another deployment's container: %v, want ErrNotOwned", err)
	}
	if err := rt.Remove(ctx, name); !errors.Is(err, docker.ErrNotOwned) {
		t.Fatalf("remove another deployment's container by name: %v, want ErrNotOwned", err)
	}
	still("a stop and a remove")
	list, err := rt.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Fatalf("the runtime lists another deployment's containers as its own: %+v", list)
	}
}
