package conform_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mapyard/mapyard/orchestrator/conform"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
)

// images are the map images `make test` checks, each with exactly the checks it must
// fail (none for an image that obeys the contract). Adding an image is adding a line:
// kitImage names an image `make images` builds beside the map's, with the same tag.
var images = []struct {
	name  string
	image func(t *testing.T, cli *client.Client) string
	fail  []string
}{
	{"kit", kitImage("mapyard/map"), nil},
	{"tag", kitImage("mapyard/tag"), nil},       // the second game, on the game API (mapserver/tag)
	{"node", kitImage("mapyard/node-map"), nil}, // mapserver/examples/node (make node-map-image)
	{"broken", brokenImage, []string{"container-user", "credential-missing", "credential-wrong",
		"sigterm-exit", "push-on-sigterm", "no-writes", "pushes"}},
}

// TestRun_Images runs the conformance kit against every image of images, one after the
// other (a run is a few containers on a shared engine), and checks which checks fail.
func TestRun_Images(t *testing.T) {
	cli := dockertest.Client(t)
	for _, img := range images {
		t.Run(img.name, func(t *testing.T) {
			ref := img.image(t, cli)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			start := time.Now()
			rep, err := conform.Run(ctx, conform.Options{Image: ref, Docker: cli, Log: testLogger(t)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			_ = rep.WriteText(&text)
			t.Logf("%s in %s:\n%s", ref, time.Since(start).Round(time.Millisecond), text.String())
			var names []string
			for _, c := range rep.Checks {
				names = append(names, c.Name)
			}
			if want := checkNames(); !slices.Equal(names, want) {
				t.Fatalf("the report lists %v, want every check once in order: %v", names, want)
			}
			if got := rep.Failures(); !slices.Equal(got, img.fail) {
				t.Errorf("%s failed %v, want exactly %v", ref, got, img.fail)
			}
			if rep.Passed+rep.Failed != len(conform.Checks) || rep.Failed != len(img.fail) {
				t.Errorf("counts %s for %d checks", rep.Summary(), len(conform.Checks))
			}
		})
	}
}

// TestRun_FromTheOrchestratorImage runs the kit as a studio without Go does (README,
// "Develop a map alone"): the shipped orchestrator image's conform subcommand, in a
// container on the host's network with the engine's socket and a tmpfs for its
// database, against the kit's map image; it must pass every check and exit 0.
func TestRun_FromTheOrchestratorImage(t *testing.T) {
	cli := dockertest.Client(t)
	orch, mapImage := dockertest.OrchestratorImage(), dockertest.MapImage()
	dockertest.RequireImage(t, cli, orch)
	dockertest.RequireImage(t, cli, mapImage)
	sock := strings.TrimPrefix(cli.DaemonHost(), "unix://")
	if sock == cli.DaemonHost() {
		t.Fatalf("the engine is at %s; this test mounts a unix socket", sock)
	}
	info, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	gid := strconv.FormatUint(uint64(info.Sys().(*syscall.Stat_t).Gid), 10)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// As README shows it, with this engine's socket and the images of this build.
	cmd := exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "host", "--tmpfs", "/tmp",
		"-v", sock+":/var/run/docker.sock", "--group-add", gid,
		orch, "conform", "--image", mapImage)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+cli.DaemonHost())
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if want := fmt.Sprintf("%d passed, 0 failed", len(conform.Checks)); err != nil || lines[len(lines)-1] != want {
		t.Fatalf("docker run %s conform: %v, last line %q; want exit 0 and %q", orch, err, lines[len(lines)-1], want)
	}
}

// kitImage returns the image of repository repo that `make images` built with the tag
// of MAPYARD_TEST_MAP_IMAGE (mapyard/map:<version>), so every image of one build is
// checked together.
func kitImage(repo string) func(*testing.T, *client.Client) string {
	return func(t *testing.T, cli *client.Client) string {
		ref := dockertest.MapImage()
		if i := strings.LastIndex(ref, ":"); i > 0 && !strings.Contains(ref[i:], "/") {
			ref = repo + ref[i:]
		} else {
			ref = repo + ":latest"
		}
		if _, err := cli.ImageInspect(context.Background(), ref); err != nil {
			if os.Getenv("MAPYARD_REQUIRE_DOCKER") == "1" {
				t.Fatalf("image %s is missing (run `make images`): %v", ref, err)
			}
			t.Skipf("image %s is missing (run `make images`): %v", ref, err)
		}
		return ref
	}
}

// brokenImage builds testdata/brokenmap, a static binary, into a FROM scratch image of
// its own, removed when the test ends.
func brokenImage(t *testing.T, cli *client.Client) string {
	// No USER: the image runs as root, on purpose. /state is 10001's, so that the map's
	// write succeeds where the root is writable.
	return dockertest.BuildStaticImage(t, cli, "mapyard/conform-broken", "testdata/brokenmap",
		"FROM scratch\nCOPY --chown=10001:10001 state/ /state/\nCOPY brokenmap /brokenmap\nENTRYPOINT [\"/brokenmap\"]\n",
		dockertest.File{Name: "state/.keep"})
}

// checkNames are the names of conform.Checks, in order.
func checkNames() []string {
	var out []string
	for _, c := range conform.Checks {
		out = append(out, c.Name)
	}
	return out
}

// testLogger sends the in-process orchestrator's lines to the test log, which shows
// them when a test fails.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tbWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tbWriter struct{ t *testing.T }

func (w tbWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
