package swarmlab_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/swarm/swarmlab"
)

// TestLab_CrossNode proves the lab: a service pinned to node 2 runs there, on an
// attachable overlay network, and a container on node 1 attached to the same overlay
// reaches it over TCP at its task's address (so overlay traffic crosses the nodes).
// Then the node-loss fault: node 2 killed, the manager reports it down (the time it
// took is logged), and started again, it is ready once more.
func TestLab_CrossNode(t *testing.T) {
	lab := swarmlab.UpAlone(t)
	if lab.Node1ID == lab.Node2ID {
		t.Fatalf("both clients reach node %s", lab.Node1ID)
	}
	ctx := context.Background()
	img := swarmlab.ProbeImage(t, lab.Node1)
	lab.Load(t, img)
	if _, err := lab.Node2.ImageInspect(ctx, img); err != nil {
		t.Fatalf("node 2 lacks %s after Load: %v", img, err)
	}
	t.Cleanup(func() {
		_, _ = lab.Node2.ImageRemove(context.Background(), img, image.RemoveOptions{Force: true, PruneChildren: true})
	})

	suffix := dockertest.RandomHex(t, 4)
	netName := "mapyard-lab-test-" + suffix
	nw, err := lab.Node1.NetworkCreate(ctx, netName, network.CreateOptions{Driver: "overlay", Attachable: true,
		Labels: map[string]string{"io.mapyard.test": "swarmlab"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Node1.NetworkRemove(context.Background(), nw.ID); err != nil && !errdefs.IsNotFound(err) {
			t.Logf("cleanup: remove network %s: %v", netName, err)
		}
	})

	// The server, pinned to node 2. DNS round robin rather than a virtual IP: the lab's
	// kernel may have no IPVS, and maps are reached at their task's address anyway.
	svc, err := lab.Node1.ServiceCreate(ctx, swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: "mapyard-lab-probe-" + suffix, Labels: map[string]string{"io.mapyard.test": "swarmlab"}},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{Image: img, Args: []string{"serve", ":8080"}},
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionNone},
			Placement:     &swarm.Placement{Constraints: []string{swarmlab.Constraint(2)}},
			Networks:      []swarm.NetworkAttachmentConfig{{Target: nw.ID}},
		},
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR},
	}, swarm.ServiceCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Node1.ServiceRemove(context.Background(), svc.ID); err != nil && !errdefs.IsNotFound(err) {
			t.Logf("cleanup: remove service: %v", err)
		}
	})
	task := runningTask(t, lab.Node1, svc.ID)
	if task.NodeID != lab.Node2ID {
		t.Fatalf("the task pinned to node 2 runs on node %s, want %s", task.NodeID, lab.Node2ID)
	}
	cid := task.Status.ContainerStatus.ContainerID
	if c, err := lab.Node2.ContainerInspect(ctx, cid); err != nil || !c.State.Running {
		t.Fatalf("node 2's engine does not run the task's container %s: %v", cid, err)
	}
	addr := taskAddress(t, task, nw.ID)

	t.Run("ReachedFromNode1OverTheOverlay", func(t *testing.T) {
		out, code := runOnNode1(t, lab.Node1, img, netName, "get", "http://"+net.JoinHostPort(addr, "8080")+"/", "30s")
		if code != 0 {
			t.Fatalf("the probe on node 1 did not reach %s on node 2 (exit %d): %s", addr, code, out)
		}
		if want := cid[:12]; strings.TrimSpace(out) != want {
			t.Fatalf("answered by %q, want the task's container %s on node 2", out, want)
		}
	})

	t.Run("NodeLost", func(t *testing.T) {
		lab.KillNode2(t)
		took := lab.WaitNode2(t, swarm.NodeStateDown, time.Minute)
		t.Logf("the manager reported node 2 down %s after its engine and containers were killed (default heartbeat)", took.Round(100*time.Millisecond))
		lab.StartNode2(t)
		lab.WaitNode2(t, swarm.NodeStateReady, time.Minute)
	})
}

// runningTask waits until service id's task runs and returns it.
func runningTask(t *testing.T, cli *client.Client, id string) swarm.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		tasks, err := cli.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", id))})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			switch st := task.Status.State; {
			case st == swarm.TaskStateRunning && task.Status.ContainerStatus != nil:
				return task
			case st == swarm.TaskStateFailed || st == swarm.TaskStateRejected || st == swarm.TaskStateComplete:
				t.Fatalf("the service's task ended %s: %s", st, task.Status.Err)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the service's task does not run: %+v", tasks)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// taskAddress is the task's IPv4 address on network nw.
func taskAddress(t *testing.T, task swarm.Task, nw string) string {
	t.Helper()
	for _, a := range task.NetworksAttachments {
		if a.Network.ID != nw {
			continue
		}
		for _, cidr := range a.Addresses {
			if ip, _, err := net.ParseCIDR(cidr); err == nil && ip.To4() != nil {
				return ip.String()
			}
		}
	}
	t.Fatalf("the task has no address on network %s: %+v", nw, task.NetworksAttachments)
	return ""
}

// runOnNode1 runs img with args in a container on node 1 attached to netName, waits
// until it exits and returns its output and exit code.
func runOnNode1(t *testing.T, cli *client.Client, img, netName string, args ...string) (string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Cmd: args, Labels: map[string]string{"io.mapyard.test": "swarmlab"}},
		&container.HostConfig{NetworkMode: container.NetworkMode(netName)}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	})
	waitC, errC := cli.ContainerWait(ctx, c.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	var code int64
	select {
	case res := <-waitC:
		code = res.StatusCode
	case err := <-errC:
		t.Fatalf("wait for the probe: %v", err)
	}
	logs, err := cli.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, logs); err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}
