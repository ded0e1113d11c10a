package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/supervise"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestOrchestrator_AdoptAfterSIGKILL kills the orchestrator with SIGKILL while maps run
// (the default map, one created through the admin API, and a warm-pool container), then
// starts a new one on the same database: every map is adopted with the same container
// and no restart, and re-registers; a labelled container of an unknown instance is
// removed.
func TestOrchestrator_AdoptAfterSIGKILL(t *testing.T) {
	cli := dockertest.Client(t)
	ctx := context.Background()
	deployment := "test-" + randomHex(t, 4)
	t.Cleanup(func() { dockertest.RemoveDeployment(t, cli, deployment) })
	def, created, ghost := deployment+"-d", deployment+"-b", deployment+"-ghost"

	secret := randomHex(t, 16)
	// The control port stays the same across the restart, as in a deployment (9000):
	// the running maps keep calling it.
	env := childEnv(deployment, "127.0.0.1:"+strconv.Itoa(testutil.FreePort(t)), filepath.Join(t.TempDir(), "mapyard.db"), secret,
		"ORCH_DEFAULT_INSTANCE_ID="+def,
		"ORCH_WARM_POOL_SIZE=1",
		"ORCH_MAP_ORPHAN_GRACE_MS=300",
		"ORCH_MAP_PROBE_MS=300",
		"MAP_HEARTBEAT_MS=300",
	)
	first := startOrchestrator(t, env)
	waitStatus(t, first.public+"/readyz", http.StatusOK, 60*time.Second)

	// An instance created at runtime through the admin API, which the database keeps.
	// Although the pool is ready, an operator's create gets a container of its own,
	// so Docker users find it by its label as well as by its name.
	waitMetric(t, first.control, secret, "mapyard_warm_pool_ready 1", 30*time.Second)
	testutil.PostJSON(t, first.control+httpapi.PathAdminMaps, secret,
		`{"instanceId":"`+created+`","mapId":"frontier","config":{"seed":7}}`, http.StatusCreated, nil)
	waitInstance(t, first.control, secret, created, orchestrator.StateReady, 30*time.Second)
	waitMetric(t, first.control, secret, "mapyard_warm_pool_ready 1", 30*time.Second)
	for _, id := range []string{def, created} {
		if got, want := byInstanceLabel(t, cli, deployment, id), getInstance(t, first.control, secret, id).ContainerID; len(got) != 1 || got[0] != want {
			t.Fatalf("docker ps --filter label=%s=%s: %v, want its container %s", docker.LabelInstance, id, got, want)
		}
	}

	// A labelled container of this deployment for an instance nobody wants, on the
	// network the orchestrator made sure of.
	mapNet, err := cli.NetworkInspect(ctx, "mapyard", network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ghostRT := docker.NewRuntime(cli, docker.Template{
		Network: "mapyard", Gateway: mapNet.IPAM.Config[0].Gateway,
		Deployment: deployment, MemoryMB: 64, NanoCPUs: 500_000_000, PidsLimit: 64,
	})
	ghostC, err := ghostRT.Start(ctx, supervise.Spec{
		InstanceID: ghost, MapID: "forest", Image: dockertest.MapImage(),
		Env: []string{"MAP_INSTANCE_ID=" + ghost, "MAP_CREDENTIAL=ghost-credential-0000", "MAP_ORCH_CREDENTIAL=ghost-credential-0000", "MAP_ORCH_URL=http://127.0.0.1:1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ghostID := ghostC.ID

	before := map[string]container.InspectResponse{}
	for _, id := range []string{def, created} {
		inst := getInstance(t, first.control, secret, id)
		before[id] = inspect(t, cli, inst.ContainerID)
	}
	pool := poolContainers(t, cli, deployment)
	if len(pool) != 1 {
		t.Fatalf("pool containers %v, want 1", pool)
	}

	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.wait(10 * time.Second)

	second := startOrchestrator(t, env)
	waitStatus(t, second.public+"/readyz", http.StatusOK, 30*time.Second)

	for _, id := range []string{def, created} {
		t.Run("Adopted/"+id, func(t *testing.T) {
			inst := waitInstance(t, second.control, secret, id, orchestrator.StateReady, 10*time.Second)
			was := before[id]
			if inst.ContainerID != was.ID || inst.Restarts != 0 {
				t.Fatalf("instance %+v, want container %s and no restarts", inst, was.ID)
			}
			now := inspect(t, cli, was.ID)
			if !now.State.Running || now.State.StartedAt != was.State.StartedAt || now.RestartCount != 0 {
				t.Fatalf("container restarted: running=%v started %s→%s", now.State.Running, was.State.StartedAt, now.State.StartedAt)
			}
			deadline := time.Now().Add(10 * time.Second)
			for !getInstance(t, second.control, secret, id).Registered {
				if time.Now().After(deadline) {
					t.Fatal("adopted map did not register with the new orchestrator")
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	t.Run("FoundByLabelAfterAdoption", func(t *testing.T) {
		if got := byInstanceLabel(t, cli, deployment, created); len(got) != 1 || got[0] != before[created].ID {
			t.Fatalf("by label: %v, want %s", got, before[created].ID)
		}
	})
	t.Run("PoolAdopted", func(t *testing.T) {
		waitMetric(t, second.control, secret, "mapyard_warm_pool_ready 1", 10*time.Second)
		if now := poolContainers(t, cli, deployment); len(now) != 1 || now[0] != pool[0] {
			t.Fatalf("pool containers %v, want %v kept", now, pool)
		}
	})
	t.Run("UnknownRemoved", func(t *testing.T) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := cli.ContainerInspect(ctx, ghostID); err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("container of an unknown instance was not removed")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Run("AdminStopAndRestart", func(t *testing.T) {
		testutil.PostJSON(t, second.control+httpapi.PathAdminMaps+"/"+created+"/stop", secret, ``, http.StatusOK, nil)
		if inst := getInstance(t, second.control, secret, created); inst.State != orchestrator.StateStopped || inst.Restarts != 0 {
			t.Fatalf("after admin stop: %+v", inst)
		}
		testutil.PostJSON(t, second.control+httpapi.PathAdminMaps+"/"+created+"/restart", secret, ``, http.StatusAccepted, nil)
		inst := waitInstance(t, second.control, secret, created, orchestrator.StateReady, 30*time.Second)
		if inst.Restarts != 0 {
			t.Fatalf("admin restart counted as a crash: %+v", inst)
		}
		testutil.PostJSON(t, second.control+httpapi.PathAdminMaps+"/nope/stop", secret, ``, http.StatusNotFound, nil)
		testutil.PostJSON(t, second.control+httpapi.PathAdminMaps, secret, `{"instanceId":"`+created+`","mapId":"frontier"}`, http.StatusConflict, nil)
		testutil.PostJSON(t, second.control+httpapi.PathAdminMaps, secret, `{"instanceId":"x","mapId":"forest"}`, http.StatusBadRequest, nil)
		testutil.PostJSON(t, second.control+httpapi.PathAdminMaps, secret, `{"instanceId":"x","mapId":"frontier","env":["MAP_FAULT_FAIL_HEALTH=true"]}`, http.StatusBadRequest, nil)
	})
	t.Run("ErrMetricsUnauthorized", func(t *testing.T) {
		resp, err := http.Get(second.control + httpkit.PathMetrics)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("/metrics without secret: %d", resp.StatusCode)
		}
	})

	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.wait(15 * time.Second); err != nil {
		t.Fatalf("orchestrator did not exit cleanly: %v", err)
	}
}

// poolContainers lists the deployment's blank pool containers as `docker ps` shows
// them: named mapyard-pool-<hex>.<deployment>, with a pool label and no instance label.
func poolContainers(t *testing.T, cli *client.Client, deployment string) []string {
	t.Helper()
	list, err := cli.ContainerList(context.Background(), container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", docker.LabelDeployment+"="+deployment),
		filters.Arg("label", docker.LabelPool),
		filters.Arg("name", "^/mapyard-"+mapgen.PoolIDPrefix))})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list {
		if c.Labels[docker.LabelInstance] != "" || "/"+docker.PoolContainerName(deployment, c.Labels[docker.LabelPool]) != c.Names[0] {
			t.Fatalf("pool container %v: labels %v", c.Names, c.Labels)
		}
		ids = append(ids, c.ID)
	}
	return ids
}

// byInstanceLabel lists the running containers `docker ps --filter
// label=io.mapyard.instance=<id>` shows, checking each is named after the instance and
// its deployment.
func byInstanceLabel(t *testing.T, cli *client.Client, deployment, id string) []string {
	t.Helper()
	list, err := cli.ContainerList(context.Background(), container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", docker.LabelInstance+"="+id))})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list {
		if len(c.Names) != 1 || c.Names[0] != "/"+docker.ContainerName(deployment, id) {
			t.Fatalf("container labelled %s is named %v", id, c.Names)
		}
		ids = append(ids, c.ID)
	}
	return ids
}

func inspect(t *testing.T, cli *client.Client, id string) container.InspectResponse {
	t.Helper()
	info, err := cli.ContainerInspect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func getInstance(t *testing.T, controlURL, secret, id string) orchestrator.Instance {
	t.Helper()
	var inst orchestrator.Instance
	testutil.GetJSON(t, controlURL+httpapi.PathAdminMaps+"/"+id, secret, http.StatusOK, &inst)
	return inst
}

func waitInstance(t *testing.T, controlURL, secret, id string, st orchestrator.InstanceState, timeout time.Duration) orchestrator.Instance {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		inst := getInstance(t, controlURL, secret, id)
		if inst.State == st {
			return inst
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s is %s (%s) after %s, want %s", id, inst.State, inst.Reason, timeout, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitMetric waits until the control listener's /metrics contains line.
func waitMetric(t *testing.T, controlURL, secret, line string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		req, _ := http.NewRequest(http.MethodGet, controlURL+httpkit.PathMetrics, nil)
		req.Header.Set(httpkit.SecretHeader, secret)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), "\n"+line+"\n") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("metric %q not seen within %s", line, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestOrchestrator_RestartsKeptAcrossRestart kills a map's container, which the
// orchestrator restarts (restarts 1 in /admin/maps), then kills the orchestrator with
// SIGKILL and starts it again on the same database: /admin/maps still says 1, since
// the count is what an operator reads after an incident.
func TestOrchestrator_RestartsKeptAcrossRestart(t *testing.T) {
	k := newKit(t)
	crashed := k.instance(t, k.def)
	if err := k.cli.ContainerKill(context.Background(), crashed.ContainerID, "KILL"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the map restarted in a new container", 60*time.Second, func() bool {
		i := k.instance(t, k.def)
		return i.State == orchestrator.StateReady && i.ContainerID != crashed.ContainerID && i.Restarts == 1
	})
	if err := k.orch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	k.orch.wait(10 * time.Second)
	k.restart(t)

	if got := k.instance(t, k.def); got.Restarts != 1 {
		t.Fatalf("after the orchestrator restart %s shows %d restarts, want 1", k.def, got.Restarts)
	}
	var list struct{ Instances []orchestrator.Instance }
	testutil.GetJSON(t, k.orch.control+httpapi.PathAdminMaps, k.secret, http.StatusOK, &list)
	for _, i := range list.Instances {
		if i.ID == k.def && i.Restarts != 1 {
			t.Fatalf("GET /admin/maps lists %s with %d restarts, want 1", k.def, i.Restarts)
		}
	}
}
