package swarmlab

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"

	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// ProbeImage builds the lab's probe (testdata/probe: serve, get, relay) into a FROM
// scratch image on cli's engine and returns its name; it is removed when the test ends.
func ProbeImage(tb testing.TB, cli *client.Client) string {
	tb.Helper()
	return dockertest.BuildStaticImage(tb, cli, "mapyard/lab-probe",
		filepath.Join(testutil.ModuleRoot(tb), "orchestrator/swarm/swarmlab/testdata/probe"),
		"FROM scratch\nCOPY probe /probe\nENTRYPOINT [\"/probe\"]\n")
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
