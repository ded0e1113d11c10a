package docker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/mapyard/mapyard/mapserver/mapcontrol"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/control"
)

// fakeAPI is a hand-written in-memory engine: enough of the container lifecycle for the
// supervisor's rules to be tested with a fake clock, without Docker.
type fakeAPI struct {
	mu         sync.Mutex
	next       int
	containers map[string]*fakeContainer
	calls      map[string]int
	// events returns the channels of each Events call; nil blocks until ctx ends.
	events func(ctx context.Context) (<-chan events.Message, <-chan error)
	// stopErr, when set, is what ContainerStop answers.
	stopErr error
}

type fakeContainer struct {
	name     string
	labels   map[string]string
	state    string
	exitCode int
}

var _ API = (*fakeAPI)(nil)

func newFakeAPI() *fakeAPI {
	return &fakeAPI{containers: map[string]*fakeContainer{}, calls: map[string]int{}}
}

func (f *fakeAPI) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func (f *fakeAPI) find(ref string) (string, *fakeContainer) {
	if c, ok := f.containers[ref]; ok {
		return ref, c
	}
	for id, c := range f.containers {
		if c.name == ref {
			return id, c
		}
	}
	return "", nil
}

func (f *fakeAPI) ContainerCreate(_ context.Context, cfg *container.Config, _ *container.HostConfig, _ *network.NetworkingConfig, _ *ocispec.Platform, name string) (container.CreateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["create"]++
	if _, c := f.find(name); c != nil {
		return container.CreateResponse{}, errdefs.ErrConflict
	}
	f.next++
	id := fmt.Sprintf("c%063d", f.next)
	f.containers[id] = &fakeContainer{name: name, labels: cfg.Labels, state: "created"}
	return container.CreateResponse{ID: id}, nil
}

func (f *fakeAPI) ContainerStart(_ context.Context, id string, _ container.StartOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["start"]++
	if _, c := f.find(id); c != nil {
		c.state = "running"
		return nil
	}
	return errdefs.ErrNotFound
}

func (f *fakeAPI) ContainerStop(_ context.Context, id string, _ container.StopOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["stop"]++
	if f.stopErr != nil {
		return f.stopErr
	}
	_, c := f.find(id)
	if c == nil {
		return errdefs.ErrNotFound
	}
	if c.state != "running" {
		return errdefs.ErrNotModified
	}
	c.state, c.exitCode = "exited", 0
	return nil
}

func (f *fakeAPI) ContainerRename(_ context.Context, id, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, c := f.find(id); c != nil {
		c.name = name
		return nil
	}
	return errdefs.ErrNotFound
}

func (f *fakeAPI) Events(ctx context.Context, _ events.ListOptions) (<-chan events.Message, <-chan error) {
	f.mu.Lock()
	f.calls["events"]++
	fn := f.events
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx)
	}
	return make(chan events.Message), make(chan error)
}

func (f *fakeAPI) ContainerInspect(_ context.Context, ref string) (container.InspectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, c := f.find(ref)
	if c == nil {
		return container.InspectResponse{}, errdefs.ErrNotFound
	}
	ports := nat.PortMap{}
	for i, p := range []int{MapGamePort, MapControlPort} {
		ports[nat.Port(strconv.Itoa(p)+"/tcp")] = []nat.PortBinding{{HostIP: "127.0.0.1", HostPort: strconv.Itoa(30000 + 2*len(id)%7 + i)}}
	}
	ns := &container.NetworkSettings{}
	ns.Ports = ports
	return container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{ID: id, Name: "/" + c.name,
			State: &container.State{Running: c.state == "running", ExitCode: c.exitCode}},
		Config:          &container.Config{Labels: c.labels},
		NetworkSettings: ns,
	}, nil
}

func (f *fakeAPI) ContainerList(context.Context, container.ListOptions) ([]container.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["list"]++
	var out []container.Summary
	for id, c := range f.containers {
		out = append(out, container.Summary{ID: id, Names: []string{"/" + c.name}, Labels: c.labels, State: container.ContainerState(c.state)})
	}
	return out, nil
}

func (f *fakeAPI) ContainerRemove(_ context.Context, ref string, _ container.RemoveOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["remove"]++
	id, c := f.find(ref)
	if c == nil {
		return errdefs.ErrNotFound
	}
	delete(f.containers, id)
	return nil
}

func (f *fakeAPI) NetworkInspect(context.Context, string, network.InspectOptions) (network.Inspect, error) {
	return network.Inspect{}, errdefs.ErrNotImplemented
}

func (f *fakeAPI) NetworkCreate(context.Context, string, network.CreateOptions) (network.CreateResponse, error) {
	return network.CreateResponse{}, errdefs.ErrNotImplemented
}

// fakeRPC answers every map call with err.
type fakeRPC struct {
	mu  sync.Mutex
	err error
}

var _ MapRPC = (*fakeRPC)(nil)

func (r *fakeRPC) Health(context.Context, string) (mapcontrol.MapHealth, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return mapcontrol.MapHealth{Status: "ok"}, r.err
}

func (r *fakeRPC) StartInstance(context.Context, string, mapcontrol.StartInstance) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// syncClock is a fake clock safe for the supervisor's goroutines.
type syncClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *syncClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *syncClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeSupervisor is a Supervisor over fakeAPI and fakeRPC with a fake clock, its
// background loops not started: tests drive check and events themselves.
type fakeSupervisor struct {
	*Supervisor
	api   *fakeAPI
	rpc   *fakeRPC
	clock *syncClock

	mu          sync.Mutex
	transitions []string
}

func newFakeSupervisor(t *testing.T) *fakeSupervisor {
	t.Helper()
	f := &fakeSupervisor{api: newFakeAPI(), rpc: &fakeRPC{}, clock: &syncClock{t: time.Unix(1_700_000_000, 0)}}
	s := NewSupervisor(f.api, MapSpec{Deployment: "unit"}, f.rpc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.Now, s.PoolSize, s.DefaultInstanceID = f.clock.Now, 0, "d-1"
	s.Policy = RestartPolicy{Window: time.Minute, Max: 3, Quarantine: 30 * time.Second}
	s.OnTransition = func(id string, from, to orchestrator.InstanceState, reason string) {
		f.mu.Lock()
		f.transitions = append(f.transitions, fmt.Sprintf("%s %s→%s: %s", id, from, to, reason))
		f.mu.Unlock()
	}
	s.Metrics = NewMetrics(nil)
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	t.Cleanup(func() { s.Close() })
	if err := s.loadWanted(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.Supervisor = s
	return f
}

// ready starts the default instance and registers it.
func (f *fakeSupervisor) ready(t *testing.T) orchestrator.Instance {
	t.Helper()
	f.Supervisor.mu.Lock()
	in := f.instances["d-1"]
	f.spawn(in, orchestrator.StateStarting, "test")
	f.Supervisor.mu.Unlock()
	f.settle(t)
	if err := f.MapReady(context.Background(), control.MapReady{InstanceID: "d-1"}); err != nil {
		t.Fatal(err)
	}
	inst, _ := f.Instance("d-1")
	if inst.State != orchestrator.StateReady {
		t.Fatalf("not ready: %+v", inst)
	}
	return inst
}

// settle waits until no start or stop is in flight.
func (f *fakeSupervisor) settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.Supervisor.mu.Lock()
		busy := false
		for _, in := range f.instances {
			busy = busy || in.busy
		}
		f.Supervisor.mu.Unlock()
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("supervisor still busy")
		}
		time.Sleep(time.Millisecond)
	}
}

func (f *fakeSupervisor) saw(substr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, tr := range f.transitions {
		if strings.Contains(tr, substr) {
			return true
		}
	}
	return false
}

// die simulates the die event of the default instance's container with code.
func (f *fakeSupervisor) die(t *testing.T, code int) {
	t.Helper()
	inst, _ := f.Instance("d-1")
	f.api.mu.Lock()
	if _, c := f.api.find(inst.ContainerID); c != nil {
		c.state, c.exitCode = "exited", code
	}
	f.api.mu.Unlock()
	f.handleEvent(events.Message{Action: "die", Actor: events.Actor{ID: inst.ContainerID, Attributes: map[string]string{"exitCode": strconv.Itoa(code)}}})
	f.settle(t)
}
