package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestUp_WaitSaysWhyAContainerCannotStart: `make up` waits for the edge's /readyz
// while it watches the kit's containers (scripts/wait-ready.sh). A container that
// refuses its configuration and is restarted over and over (as compose restarts an
// orchestrator whose env file has a bad value) ends the wait at once, with the
// container's own words, instead of two minutes of silence.
func TestUp_WaitSaysWhyAContainerCannotStart(t *testing.T) {
	cli := dockertest.Client(t)
	ctx := context.Background()
	// The map image with no credential: it says so and exits 2; the restart policy
	// starts it again, as compose's does.
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: dockertest.MapImage()},
		&container.HostConfig{RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped}}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) })
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	never := "http://127.0.0.1:" + strconv.Itoa(testutil.FreePort(t)) + "/readyz" // nothing listens there
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join("..", "..", "..", "scripts", "wait-ready.sh"), never, "90", c.ID).CombinedOutput()
	t.Logf("wait-ready.sh:\n%s", out)
	if err == nil {
		t.Fatal("the wait succeeded with nothing ready")
	}
	if strings.Contains(string(out), "did not answer 200 within") || !strings.Contains(string(out), "MAP_CREDENTIAL") {
		t.Fatal("the wait did not end on the container, with its own words")
	}
}
