// Package dockertest gives tests a client of the real Docker engine. Tests that need
// one skip when no engine answers, unless MAPYARD_REQUIRE_DOCKER=1 (as in CI), where
// they fail instead: a CI run must never pass by skipping its Docker tests.
package dockertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/mapyard/mapyard/orchestrator/docker"
)

// MapImage returns the map image tests start: MAPYARD_TEST_MAP_IMAGE, or
// mapyard/map:latest. `make test` builds the image and passes its version tag, because
// the engine may be shared (by other checkouts' test runs, or a `make up`) and
// mapyard/map:latest may meanwhile be another build.
func MapImage() string {
	if img := os.Getenv("MAPYARD_TEST_MAP_IMAGE"); img != "" {
		return img
	}
	return "mapyard/map:latest"
}

// TagGameImage returns the image of tag, the second game, that tests start:
// MAPYARD_TEST_TAG_IMAGE, or mapyard/tag:latest (`make test` passes the version tag
// `make images` built, for the reason MapImage gives).
func TagGameImage() string {
	if img := os.Getenv("MAPYARD_TEST_TAG_IMAGE"); img != "" {
		return img
	}
	return "mapyard/tag:latest"
}

// OrchestratorImage returns the orchestrator's image that tests of the kit in
// containers (on Swarm) start: MAPYARD_TEST_ORCH_IMAGE, or mapyard/orchestrator:latest
// (`make test` passes the version tag `make images` built, for the reason MapImage
// gives).
func OrchestratorImage() string {
	if img := os.Getenv("MAPYARD_TEST_ORCH_IMAGE"); img != "" {
		return img
	}
	return "mapyard/orchestrator:latest"
}

// RequireImage skips tb when the engine lacks image ref, or fails it under
// MAPYARD_REQUIRE_DOCKER=1: for the tests of an image besides the map's, which Client
// checks.
func RequireImage(tb testing.TB, cli *client.Client, ref string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		if os.Getenv("MAPYARD_REQUIRE_DOCKER") == "1" {
			tb.Fatalf("image %s is missing (run `make images`): %v", ref, err)
		}
		tb.Skipf("image %s is missing (run `make images`; set MAPYARD_REQUIRE_DOCKER=1 to fail instead): %v", ref, err)
	}
}

// Client returns a client of the local Docker engine, closed when the test ends, after
// checking that the engine answers and that the images tests need exist.
func Client(tb testing.TB) *client.Client {
	tb.Helper()
	required := os.Getenv("MAPYARD_REQUIRE_DOCKER") == "1"
	unavailable := func(format string, args ...any) {
		tb.Helper()
		if required {
			tb.Fatalf(format, args...)
		}
		tb.Skipf(format+" (set MAPYARD_REQUIRE_DOCKER=1 to fail instead)", args...)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		unavailable("docker client: %v", err)
	}
	tb.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		unavailable("no Docker engine answers: %v", err)
	}
	if _, err := cli.ImageInspect(ctx, MapImage()); err != nil {
		unavailable("image %s is missing (run `make images`): %v", MapImage(), err)
	}
	return cli
}

// RemoveDeployment force-removes every container labelled with a test deployment. It
// lists again until nothing is left twice in a row, because a create abandoned at
// shutdown may still complete in the engine.
func RemoveDeployment(tb testing.TB, cli *client.Client, deployment string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for quiet := 0; quiet < 2 && ctx.Err() == nil; {
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
			filters.Arg("label", docker.LabelDeployment+"="+deployment))})
		if err != nil {
			tb.Logf("cleanup: %v", err)
			return
		}
		if len(list) == 0 {
			quiet++
		}
		for _, c := range list {
			if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) && !errdefs.IsConflict(err) {
				tb.Logf("cleanup %s: %v", c.ID, err)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TagImage tags image source as target on the engine, as a second game's image would
// be built beside the kit's, and removes the tag (only the tag: the image keeps its
// other names) when the test ends. Tests name targets randomly, so that runs sharing
// an engine never see each other's tags.
func TagImage(tb testing.TB, cli *client.Client, source, target string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cli.ImageTag(ctx, source, target); err != nil {
		tb.Fatalf("docker tag %s %s: %v", source, target, err)
	}
	tb.Cleanup(func() { UntagImage(tb, cli, target) })
}

// UntagImage removes the tag ref from the engine; a tag already gone is fine.
func UntagImage(tb testing.TB, cli *client.Client, ref string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.ImageRemove(ctx, ref, image.RemoveOptions{}); err != nil && !errdefs.IsNotFound(err) {
		tb.Logf("cleanup: untag %s: %v", ref, err)
	}
}

// RandomHex returns n random bytes in hex: tests name their deployments and tags with
// it, so that runs sharing an engine never see each other's.
func RandomHex(tb testing.TB, n int) string {
	tb.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// LogWriter sends log lines to the test log (for a slog handler).
type LogWriter struct{ TB testing.TB }

func (w LogWriter) Write(p []byte) (int, error) {
	w.TB.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
