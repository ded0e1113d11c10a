package swarmlab

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"

	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// ProbeImage builds the lab's probe (testdata/probe: serve, get, relay) into a FROM
// scratch image on cli's engine and returns its name; it is removed when the test ends.
func ProbeImage(tb testing.TB, cli *client.Client) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "probe")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./orchestrator/swarm/swarmlab/testdata/probe")
	cmd.Dir = testutil.ModuleRoot(tb)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build the probe: %v\n%s", err, out)
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		tb.Fatal(err)
	}
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	for _, f := range []struct {
		name string
		mode int64
		body []byte
	}{
		{"Dockerfile", 0o644, []byte("FROM scratch\nCOPY probe /probe\nENTRYPOINT [\"/probe\"]\n")},
		{"probe", 0o755, binary},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body))}); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write(f.body); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	ref := "mapyard/lab-probe:test-" + dockertest.RandomHex(tb, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := cli.ImageBuild(ctx, &ctxTar, build.ImageBuildOptions{Tags: []string{ref}, Version: build.BuilderV1, Remove: true, ForceRemove: true})
	if err != nil {
		tb.Fatalf("build the probe image: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var msg struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) == nil && msg.Error != "" {
			tb.Fatalf("build the probe image: %s", msg.Error)
		}
	}
	tb.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	return ref
}

// Relay runs the probe as a relay on node 1, attached to the overlay network netName,
// from a port published on 127.0.0.1 to target (host:port on the overlay, a service's
// name for instance): the test's way to a listener that is on the overlay only, such
// as the orchestrator's control port on Swarm. It returns the relay's host:port; the
// container is removed when the test ends.
func (l *Lab) Relay(tb testing.TB, netName, target string) string {
	tb.Helper()
	img := ProbeImage(tb, l.Node1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const port = "7777/tcp"
	c, err := l.Node1.ContainerCreate(ctx,
		&container.Config{Image: img, Cmd: []string{"relay", ":7777", target}, ExposedPorts: nat.PortSet{port: {}},
			Labels: map[string]string{"io.mapyard.test": "swarmlab"}},
		&container.HostConfig{NetworkMode: container.NetworkMode(netName),
			PortBindings: nat.PortMap{port: {{HostIP: "127.0.0.1", HostPort: "0"}}}}, nil, nil, "")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = l.Node1.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	})
	if err := l.Node1.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		tb.Fatal(err)
	}
	info, err := l.Node1.ContainerInspect(ctx, c.ID)
	if err != nil {
		tb.Fatal(err)
	}
	for _, b := range info.NetworkSettings.Ports[port] {
		if b.HostIP == "127.0.0.1" {
			return net.JoinHostPort(b.HostIP, b.HostPort)
		}
	}
	tb.Fatalf("the relay has no port on 127.0.0.1: %+v", info.NetworkSettings.Ports)
	return ""
}
