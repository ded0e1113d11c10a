package docker_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/supervise"
)

// harness is one supervisor with its control listener, run against the real Docker
// engine, scoped to a deployment of its own so that it never touches other tests' (or
// a real deployment's) containers, all of which are removed when the test ends.
type harness struct {
	tb         testing.TB
	cli        *client.Client
	sup        *supervise.Supervisor
	rt         *docker.Runtime
	srv        *httpapi.Server
	deployment string
	gateway    string

	mu          sync.Mutex
	transitions []transition
	beats       map[string]int // heartbeats answered "registered", by instance
}

// countingMaps is the supervisor as the control listener sees it, counting the
// heartbeats it answers "registered", so tests can wait for a map to keep beating.
type countingMaps struct {
	*supervise.Supervisor
	h *harness
}

func (m countingMaps) Heartbeat(instanceID, generation string, players int) bool {
	ok := m.Supervisor.Heartbeat(instanceID, generation, players)
	if ok {
		m.h.mu.Lock()
		m.h.beats[instanceID]++
		m.h.mu.Unlock()
	}
	return ok
}

// heartbeats returns how many of id's heartbeats were answered "registered".
func (h *harness) heartbeats(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.beats[id]
}

type transition struct {
	at       time.Time
	id       string
	from, to orchestrator.InstanceState
	reason   string
}

// newHarness returns a harness with short windows; configure changes options before
// Open. The default instance is <deployment>-d.
func newHarness(tb testing.TB, configure func(*supervise.Supervisor)) *harness {
	tb.Helper()
	cli := dockertest.Client(tb)
	ctx := context.Background()
	h := &harness{tb: tb, cli: cli, deployment: "test-" + dockertest.RandomHex(tb, 4), beats: map[string]int{}}
	tb.Cleanup(func() { dockertest.RemoveDeployment(tb, cli, h.deployment) })

	mapNet, err := docker.EnsureNetwork(ctx, cli, "mapyard", h.deployment)
	if err != nil {
		tb.Fatal(err)
	}
	h.gateway = mapNet.Gateway
	root, err := keys.NewRoot(dockertest.RandomHex(tb, 16))
	if err != nil {
		tb.Fatal(err)
	}
	var log *slog.Logger
	if _, ok := tb.(*testing.B); ok && os.Getenv("MAPYARD_BENCH_LOG") == "" {
		log = slog.New(slog.DiscardHandler)
	} else {
		log = slog.New(slog.NewTextHandler(dockertest.LogWriter{TB: tb}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	h.rt = docker.NewRuntime(cli, docker.Template{
		Network: "mapyard", Gateway: mapNet.Gateway, Deployment: h.deployment,
		MemoryMB: 64, NanoCPUs: 500_000_000, PidsLimit: 64,
	})
	opts := supervise.DefaultOptions()
	opts.DefaultInstanceID, opts.DefaultMapID = h.deployment+"-d", "default"
	opts.Image = dockertest.MapImage()
	opts.ProbeInterval = 200 * time.Millisecond
	opts.HeartbeatTimeout = 5 * time.Second
	opts.StartTimeout = 20 * time.Second
	opts.StopGrace = 2 * time.Second
	opts.OrphanGrace = 300 * time.Millisecond
	opts.PoolSize = 0
	sup := supervise.New(h.rt, mapcontract.NewMapClient(time.Second), root, log, opts)
	sup.OnTransition = func(id string, from, to orchestrator.InstanceState, reason string) {
		h.mu.Lock()
		h.transitions = append(h.transitions, transition{time.Now(), id, from, to, reason})
		h.mu.Unlock()
	}
	if configure != nil {
		configure(sup)
	}
	h.sup = sup

	srv := httpapi.NewServer(countingMaps{sup, h}, nil, nil, root, log)
	srv.Callers = sup
	srv.PublicAddr, srv.ControlAddr, srv.ControlExtraIPs = "127.0.0.1:0", "127.0.0.1:0", []string{mapNet.Gateway}
	if err := srv.Open(); err != nil {
		tb.Fatal(err)
	}
	h.srv = srv
	tb.Cleanup(func() { srv.Close(context.Background()) })
	sup.Env = []string{
		fmt.Sprintf("MAP_ORCH_URL=http://host.docker.internal:%d", srv.ControlPort()),
		"MAP_HEARTBEAT_MS=300",
	}
	if err := sup.Open(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sup.Close() })
	return h
}

// waitFor polls cond until it holds or timeout passes.
func (h *harness) waitFor(what string, timeout time.Duration, cond func() bool) {
	h.tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			h.tb.Fatalf("timed out after %s waiting for %s; instances: %+v", timeout, what, h.sup.Instances())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitState waits until instance id is in state st and returns it.
func (h *harness) waitState(id string, st orchestrator.InstanceState, timeout time.Duration) orchestrator.Instance {
	h.tb.Helper()
	var inst orchestrator.Instance
	h.waitFor(fmt.Sprintf("%s to be %s", id, st), timeout, func() bool {
		var err error
		inst, err = h.sup.Instance(id)
		return err == nil && inst.State == st
	})
	return inst
}

// sawTransition reports whether instance id went to state `to` with a reason
// containing substr.
func (h *harness) sawTransition(id string, to orchestrator.InstanceState, substr string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, tr := range h.transitions {
		if tr.id == id && tr.to == to && strings.Contains(tr.reason, substr) {
			return true
		}
	}
	return false
}

// create makes a new instance through the supervisor.
func (h *harness) create(id string, env ...string) {
	h.tb.Helper()
	if _, err := h.sup.Create(context.Background(), orchestrator.CreateInstance{
		InstanceID: id, MapID: "frontier", Env: env, // no config: the map runs the frontier template
	}); err != nil {
		h.tb.Fatal(err)
	}
}

// reachableOnMapNetwork checks that instance id's game address is its container's
// address on the map network, and that the host reaches the map's game listener there
// (the edge's path to it, without docker-proxy).
func (h *harness) reachableOnMapNetwork(id string) {
	h.tb.Helper()
	inst, err := h.sup.Instance(id)
	if err != nil {
		h.tb.Fatal(err)
	}
	ep := h.inspect(inst.ContainerID).NetworkSettings.Networks["mapyard"]
	if ep == nil || ep.IPAddress == "" {
		h.tb.Fatalf("container of %s has no address on the map network", id)
	}
	if want := net.JoinHostPort(ep.IPAddress, strconv.Itoa(docker.MapGamePort)); inst.GameAddr != want {
		h.tb.Fatalf("instance %s game address %q, want %q", id, inst.GameAddr, want)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + inst.GameAddr + "/ws")
	if err != nil {
		h.tb.Fatalf("the map's game listener does not answer on the map network: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		h.tb.Fatalf("GET /ws without an upgrade on the map network: %d, want 400 from the map", resp.StatusCode)
	}
}

func (h *harness) inspect(id string) container.InspectResponse {
	h.tb.Helper()
	info, err := h.cli.ContainerInspect(context.Background(), id)
	if err != nil {
		h.tb.Fatal(err)
	}
	return info
}
