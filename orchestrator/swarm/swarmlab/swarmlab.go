// Package swarmlab gives tests a Docker Swarm of two nodes on one machine, the lab of
// scripts/swarm-lab.sh: node 1 is the host's engine, the Swarm's manager, advertised on
// 10.213.0.1; node 2 is a second engine in a network namespace of its own, a worker,
// which the test can kill (a node lost) and start again. Up brings the lab up once per
// test binary and returns clients of both engines.
//
// Tests never tear the lab down: other test binaries may be using it at the same time.
// A test holds the lab, for its own duration, shared (Up) or alone (UpAlone: the tests
// that kill node 2), through a file lock that every test binary of the machine sees, so
// a node loss never strikes another package's test.
// `scripts/swarm-lab.sh down` removes it. A machine that cannot host it (not root, or a
// kernel without network namespaces, veth pairs or VXLAN) skips the test, or fails it
// under MAPYARD_REQUIRE_DOCKER=1.
package swarmlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// NodeLabel is the node label whose value numbers the lab's nodes, 1 and 2.
const NodeLabel = "mapyard.node"

// Constraint is the placement constraint that pins a service to node n (1 or 2).
func Constraint(n int) string {
	return "node.labels." + NodeLabel + "==" + strconv.Itoa(n)
}

// ExitCannot is the script's exit status when the machine cannot host the lab.
const ExitCannot = 3

// Lab is the two-node Swarm as a test sees it.
type Lab struct {
	// Node1 is a client of the host's engine, the Swarm's manager; Node2 one of node
	// 2's engine. Both are closed when the test ends.
	Node1, Node2 *client.Client
	// Node1ID and Node2ID are the nodes' Swarm ids.
	Node1ID, Node2ID string
	// Node2Host is node 2's DOCKER_HOST, as the script printed it.
	Node2Host string

	script string
	alone  bool // held alone (UpAlone): KillNode2 is allowed
}

// leaseFile is the lock through which tests hold the lab, shared or alone.
const leaseFile = "/run/mapyard-swarm-lab.lease"

// upOnce runs `swarm-lab.sh up` once per test binary; every Up answers with its result.
var upOnce struct {
	sync.Once
	host string
	err  error
}

// Up brings the lab up, once per test binary, and returns it with clients of both
// nodes, held shared until the test ends. The script's own message explains a skip or
// a failure.
func Up(tb testing.TB) *Lab {
	tb.Helper()
	return up(tb, false)
}

// UpAlone is Up for a test that kills node 2: it waits until no other test holds the
// lab, and holds it alone until it ends.
func UpAlone(tb testing.TB) *Lab {
	tb.Helper()
	return up(tb, true)
}

// lease holds the lab until the test ends: shared, or alone.
func lease(tb testing.TB, alone bool) {
	tb.Helper()
	f, err := os.OpenFile(leaseFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		testutil.Unavailable(tb, "no Swarm lab: its lease %s: %v", leaseFile, err)
		return
	}
	how := syscall.LOCK_SH
	if alone {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		tb.Fatalf("hold the Swarm lab (%s): %v", leaseFile, err)
	}
	tb.Cleanup(func() { f.Close() }) // closing the file lets the lock go
}

func up(tb testing.TB, alone bool) *Lab {
	tb.Helper()
	l := &Lab{script: filepath.Join(testutil.ModuleRoot(tb), "scripts", "swarm-lab.sh"), Node1: newClient(tb, "")}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := l.Node1.Ping(ctx); err != nil {
		testutil.Unavailable(tb, "no Docker engine answers: %v", err)
	}
	lease(tb, alone)
	l.alone = alone
	upOnce.Do(func() {
		upOnce.host, upOnce.err = l.run(5*time.Minute, "up")
	})
	var cannot *cannotError
	switch {
	case errors.As(upOnce.err, &cannot):
		testutil.Unavailable(tb, "no Swarm lab: %s", cannot.msg)
	case upOnce.err != nil:
		tb.Fatal(upOnce.err)
	}
	l.Node2Host = upOnce.host
	l.Node2 = newClient(tb, l.Node2Host)
	l.Node1ID, l.Node2ID = nodeID(tb, l.Node1), nodeID(tb, l.Node2)
	return l
}

// newClient returns a client of the engine at host (the environment's when empty, as
// for every test's engine), closed when the test ends.
func newClient(tb testing.TB, host string) *client.Client {
	tb.Helper()
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if host != "" {
		opts = []client.Opt{client.WithHost(host), client.WithAPIVersionNegotiation()}
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		tb.Fatalf("docker client of %q: %v", host, err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

// nodeID is the Swarm id of cli's engine.
func nodeID(tb testing.TB, cli *client.Client) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := cli.Info(ctx)
	if err != nil {
		tb.Fatalf("docker info of %s: %v", cli.DaemonHost(), err)
	}
	if info.Swarm.NodeID == "" {
		tb.Fatalf("the engine at %s is in no Swarm (state %q)", cli.DaemonHost(), info.Swarm.LocalNodeState)
	}
	return info.Swarm.NodeID
}

// Load copies images from node 1 to node 2 (no registry is needed); an image node 2
// already has is not copied again.
func (l *Lab) Load(tb testing.TB, images ...string) {
	tb.Helper()
	if _, err := l.run(5*time.Minute, append([]string{"load"}, images...)...); err != nil {
		tb.Fatal(err)
	}
}

// KillNode2 loses node 2 at once: its engine, its containerd, the shims and every
// container of the node are killed with SIGKILL, as by a power cut. The Swarm learns
// it by its heartbeats only (WaitNode2 measures how long it takes). A node 2 still
// down when the test ends is started again then, since other tests share the lab.
func (l *Lab) KillNode2(tb testing.TB) {
	tb.Helper()
	if !l.alone {
		tb.Fatal("KillNode2 needs the lab held alone (swarmlab.UpAlone): other tests may be using node 2")
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := l.Node2.Ping(ctx); err != nil {
			l.StartNode2(tb)
		}
	})
	if _, err := l.run(time.Minute, "kill"); err != nil {
		tb.Fatal(err)
	}
}

// StartNode2 starts node 2's engine again and returns once the Swarm reports the node
// ready. Its containers do not come back: Swarm decides what runs on it.
func (l *Lab) StartNode2(tb testing.TB) {
	tb.Helper()
	if _, err := l.run(5*time.Minute, "up"); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := l.Node2.Ping(ctx); err != nil {
		tb.Fatalf("node 2 does not answer after its start: %v", err)
	}
}

// WaitNode2 waits until the manager reports node 2 in state, up to timeout, and
// returns how long that took.
func (l *Lab) WaitNode2(tb testing.TB, state swarm.NodeState, timeout time.Duration) time.Duration {
	tb.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last swarm.NodeState
	for {
		node, _, err := l.Node1.NodeInspectWithRaw(ctx, l.Node2ID)
		if err == nil {
			last = node.Status.State
			if last == state {
				return time.Since(start)
			}
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("node 2 not %s within %s (last %q, %v)", state, timeout, last, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cannotError is the script's exit status ExitCannot: the machine cannot host the lab.
type cannotError struct{ msg string }

func (e *cannotError) Error() string { return e.msg }

// run runs the lab script with args and returns the last line it printed; its
// diagnostics (stderr) are in the error when it fails.
func (l *Lab) run(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.script, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == ExitCannot {
		return "", &cannotError{msg: strings.TrimSpace(stderr.String())}
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w\n--- stdout\n%s--- stderr\n%s", l.script, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	out := strings.TrimSpace(stdout.String())
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		out = out[i+1:]
	}
	return out, nil
}
