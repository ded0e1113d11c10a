package supervise

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/orchestrator"

	"github.com/mapyard/mapyard/orchestrator/keys"
)

// fakeRuntime is a hand-written in-memory runtime that also answers the map control
// calls (/health, start-instance) of the containers it runs. Events are sent by the
// test on a channel; every call is counted.
type fakeRuntime struct {
	mu         sync.Mutex
	next       int
	containers map[string]*fakeContainer
	calls      map[string]int
	events     chan Event
	errs       chan error
	stopErr    error // what Stop answers, when set
	// stopHold, when set, holds every Stop (without f.mu) until it is closed: a
	// container that takes its time to exit.
	stopHold  chan struct{}
	healthErr error // what every /health answers, when set
	// healthOf, when it has the instance a container runs, is what that map's /health
	// answers instead: a func so that it may block, as a hung map's does, until the
	// test lets it go or the probe's context ends. It is called without f.mu.
	healthOf map[string]func(context.Context) error
	// starts are the start-instance requests the maps were sent, in order.
	starts []mapcontract.StartInstance
	// missing holds the images the engine does not have: Start of one fails with
	// ErrImageMissing, as Docker's create does.
	missing map[string]bool
	// refuse, when set, is the game's reason every start-instance is refused with
	// (map_config_refused).
	refuse string
	// unplaceable holds the images no node can take: Start of one fails with
	// ErrUnschedulable, as a cluster's runtime does.
	unplaceable map[string]bool
	// nodes are what Nodes answers: one unnamed node unless a test sets more.
	nodes []string
	// nodeUnplaceable holds "image node" pairs Start refuses with ErrUnschedulable;
	// nodeMissing those it refuses with ErrImageMissing (a node without the image).
	nodeUnplaceable, nodeMissing map[string]bool
}

// fakeContainer is one container of fakeRuntime; runs is the instance its map says it
// runs (what /health reports).
type fakeContainer struct {
	Container
	runs  string
	env   []string // what Start was given
	avoid string   // the node Start was told to avoid
}

var (
	_ Runtime = (*fakeRuntime)(nil)
	_ Nodes   = (*fakeRuntime)(nil)
	_ MapRPC  = (*fakeRuntime)(nil)
)

// testRoot mints the credentials of the rigs' containers.
var testRoot = func() *keys.Root {
	r, err := keys.NewRoot("supervise-test-root-0123456789")
	if err != nil {
		panic(err)
	}
	return r
}()

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{containers: map[string]*fakeContainer{}, calls: map[string]int{},
		events: make(chan Event), errs: make(chan error, 1), missing: map[string]bool{}}
}

// add puts a container in the runtime as if an earlier orchestrator with the same root
// had started it.
func (f *fakeRuntime) add(instanceID, runs string, pool, running bool) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	return f.addLocked(instanceID, runs, pool, running, keys.Identity{InstanceID: instanceID, Generation: fmt.Sprintf("g%d", f.next)}, testRoot.KeyID())
}

// addLegacy puts a running container in the runtime as a version before credentials
// left it: no generation, no key id.
func (f *fakeRuntime) addLegacy(instanceID string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	return f.addLocked(instanceID, instanceID, false, true, keys.Identity{InstanceID: instanceID}, "")
}

func (f *fakeRuntime) addLocked(instanceID, runs string, pool, running bool, ident keys.Identity, keyID string) string {
	id := fmt.Sprintf("c%d", f.next)
	f.containers[id] = &fakeContainer{Container: Container{ID: id, Name: "map-" + instanceID, InstanceID: instanceID, Pool: pool,
		Running: running, Exit: Exit{Code: -1}, Ports: Ports{Game: 30000 + 2*f.next, Control: 30001 + 2*f.next},
		Identity: ident, KeyID: keyID}, runs: runs}
	return id
}

// envOf returns the environment container id was started with.
func (f *fakeRuntime) envOf(id string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.containers[id]; c != nil {
		return c.env
	}
	return nil
}

// setMissing makes the engine lack image (or have it again).
func (f *fakeRuntime) setMissing(image string, missing bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.missing[image] = missing
}

// imageOf returns the image container id was started from.
func (f *fakeRuntime) imageOf(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.containers[id]; c != nil {
		return c.Image
	}
	return ""
}

func (f *fakeRuntime) count(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[call]
}

func (f *fakeRuntime) exists(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.containers[id] != nil
}

func (f *fakeRuntime) Start(_ context.Context, spec Spec) (Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["start-image "+spec.Image]++
	if spec.Pool {
		f.calls["start-pool-image "+spec.Image]++
	}
	if f.missing[spec.Image] || f.nodeMissing[spec.Image+" "+spec.Node] {
		return Container{}, fmt.Errorf("create container for %s: %w", spec.InstanceID, ErrImageMissing)
	}
	if f.unplaceable[spec.Image] || f.nodeUnplaceable[spec.Image+" "+spec.Node] {
		return Container{}, fmt.Errorf("service for %s: %w: constraint node.labels.mapyard.maps==true", spec.InstanceID, ErrUnschedulable)
	}
	f.next++
	id := f.addLocked(spec.InstanceID, spec.InstanceID, spec.Pool, true, keys.Identity{InstanceID: spec.InstanceID, Generation: spec.Generation}, spec.KeyID)
	f.containers[id].env = spec.Env
	f.containers[id].Image = spec.Image
	f.containers[id].Successor = spec.Successor
	f.containers[id].Ports.Node = spec.Node
	f.containers[id].avoid = spec.Avoid
	f.calls["start"]++
	if spec.Pool {
		f.calls["start-pool"]++
	}
	return f.containers[id].Container, nil
}

// Nodes answers the test's nodes, or one unnamed node.
func (f *fakeRuntime) Nodes(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.nodes == nil {
		return []string{""}, nil
	}
	return append([]string(nil), f.nodes...), nil
}

func (f *fakeRuntime) Stop(_ context.Context, id string, _ time.Duration) (Exit, error) {
	f.mu.Lock()
	hold := f.stopHold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["stop"]++
	if f.stopErr != nil {
		return Exit{Code: -1}, f.stopErr
	}
	c := f.containers[id]
	if c == nil {
		return Exit{Code: -1}, nil
	}
	if c.Running {
		c.Running, c.Exit = false, Exit{Code: 0}
	}
	return c.Exit, nil
}

func (f *fakeRuntime) Remove(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["remove"]++
	delete(f.containers, id)
	return nil
}

func (f *fakeRuntime) List(context.Context) ([]Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["list"]++
	var out []Container
	for _, c := range f.containers {
		out = append(out, c.Container)
	}
	return out, nil
}

func (f *fakeRuntime) Events(context.Context) (<-chan Event, <-chan error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["events"]++
	return f.events, f.errs
}

func (f *fakeRuntime) Assign(_ context.Context, id, instanceID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["assign"]++
	if c := f.containers[id]; c != nil {
		c.InstanceID, c.Successor = instanceID, false
	}
	return nil
}

// byControlURL finds the running container whose control port url names.
func (f *fakeRuntime) byControlURL(url string) *fakeContainer {
	for _, c := range f.containers {
		if c.Running && url == c.Ports.ControlURL() {
			return c
		}
	}
	return nil
}

// refuses reports whether c's map would refuse cred, as a real map refuses anything but
// the orchestrator's credential towards its own container.
func (c *fakeContainer) refuses(cred string) bool {
	want, err := testRoot.OrchCredential(c.Identity)
	return err != nil || cred != want
}

var errUnauthorized = apierr.Errorf(apierr.EUNAUTHORIZED, "missing or wrong credential")

func (f *fakeRuntime) Health(ctx context.Context, url, cred string) (mapcontract.MapHealth, error) {
	f.mu.Lock()
	f.calls["health"]++
	c := f.byControlURL(url)
	if c != nil && f.healthOf[c.runs] != nil {
		f.calls["health "+c.runs]++
		answer := f.healthOf[c.runs]
		f.mu.Unlock()
		return mapcontract.MapHealth{Status: "ok", InstanceID: c.runs}, answer(ctx)
	}
	defer f.mu.Unlock()
	switch {
	case c == nil:
		return mapcontract.MapHealth{}, errors.New("connection refused")
	case c.refuses(cred):
		return mapcontract.MapHealth{}, errUnauthorized
	case f.healthErr != nil:
		return mapcontract.MapHealth{}, f.healthErr
	}
	return mapcontract.MapHealth{Status: "ok", InstanceID: c.runs}, nil
}

func (f *fakeRuntime) StartInstance(_ context.Context, url, cred string, r mapcontract.StartInstance) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["start-instance"]++
	c := f.byControlURL(url)
	if c == nil {
		return errors.New("connection refused")
	}
	if c.refuses(cred) {
		return errUnauthorized
	}
	if f.refuse != "" {
		return apierr.Errorf(apierr.EMAPCONFIGREFUSED, "%s", f.refuse)
	}
	c.runs = r.InstanceID
	f.starts = append(f.starts, r)
	return nil
}

// Handoff answers as a map that hands nobody over, having no players: the rules tests
// drive the upgrade's container side; the handoff itself is a map's and is tested
// with real maps.
func (f *fakeRuntime) Handoff(_ context.Context, url, cred string, r mapcontract.Handoff) (mapcontract.HandoffAnswer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["handoff"]++
	c := f.byControlURL(url)
	if c == nil {
		return mapcontract.HandoffAnswer{}, errors.New("connection refused")
	}
	if c.refuses(cred) {
		return mapcontract.HandoffAnswer{}, errUnauthorized
	}
	return mapcontract.HandoffAnswer{}, nil
}

// startsOf returns the start-instance requests sent for instanceID.
func (f *fakeRuntime) startsOf(instanceID string) []mapcontract.StartInstance {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []mapcontract.StartInstance
	for _, r := range f.starts {
		if r.InstanceID == instanceID {
			out = append(out, r)
		}
	}
	return out
}

// exit ends container id with code, as the process ending would, and sends the event.
func (f *fakeRuntime) exit(id string, exit Exit) {
	f.mu.Lock()
	if c := f.containers[id]; c != nil {
		c.Running, c.Exit = false, exit
	}
	f.mu.Unlock()
	f.events <- Event{ContainerID: id, Kind: EventExited, Exit: exit}
}

// syncClock is a settable clock safe for the supervisor's goroutines.
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

// memStore is an in-memory Store.
type memStore struct {
	mu   sync.Mutex
	rows map[string]orchestrator.WantedInstance
}

var _ Store = (*memStore)(nil)

func (m *memStore) PutInstance(_ context.Context, w orchestrator.WantedInstance) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rows == nil {
		m.rows = map[string]orchestrator.WantedInstance{}
	}
	w.Restarts = m.rows[w.ID].Restarts // kept, as the SQLite store keeps it
	m.rows[w.ID] = w
	return nil
}

func (m *memStore) SetInstanceRestarts(_ context.Context, id string, n int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w, ok := m.rows[id]; ok && n > w.Restarts {
		w.Restarts = n
		m.rows[id] = w
	}
	return nil
}

func (m *memStore) DeleteInstance(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rows, id)
	return nil
}

func (m *memStore) ListInstances(context.Context) ([]orchestrator.WantedInstance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []orchestrator.WantedInstance
	for _, w := range m.rows {
		out = append(out, w)
	}
	return out, nil
}

// rig is a Supervisor over fakeRuntime with a settable clock. Its probe loop never
// fires on its own (the interval is an hour): tests run a round of the time-based
// rules with check after moving the clock.
type rig struct {
	*Supervisor
	rt    *fakeRuntime
	clock *syncClock
	store *memStore

	mu          sync.Mutex
	transitions []string
}

// newRig opens a supervisor whose default instance is d-1, with no warm pool, at most
// 3 restarts a minute and a 30 s quarantine; prepare may add containers and wanted
// instances, and change options, before Open.
func newRig(t *testing.T, prepare func(*rig)) *rig {
	t.Helper()
	r := &rig{rt: newFakeRuntime(), clock: &syncClock{t: time.Unix(1_700_000_000, 0)}, store: &memStore{}}
	opts := DefaultOptions()
	opts.DefaultInstanceID = "d-1"
	opts.PoolSize = 0
	opts.Policy = RestartPolicy{Window: time.Minute, Max: 3, Quarantine: 30 * time.Second}
	opts.ProbeInterval = time.Hour
	opts.OrphanGrace = 0
	r.Supervisor = New(r.rt, r.rt, testRoot, slog.New(slog.DiscardHandler), opts)
	r.Now, r.Store, r.Metrics = r.clock.Now, r.store, NewMetrics(nil)
	r.OnTransition = func(id string, from, to orchestrator.InstanceState, reason string) {
		r.mu.Lock()
		r.transitions = append(r.transitions, fmt.Sprintf("%s %s→%s: %s", id, from, to, reason))
		r.mu.Unlock()
	}
	if prepare != nil {
		prepare(r)
	}
	if err := r.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Close()
		// Every rule test also checks that no rule asked for a change the lifecycle
		// table does not have.
		if n := refused(r.Metrics); n > 0 {
			t.Errorf("the lifecycle table refused %v state changes", n)
		}
	})
	// The events loop takes its first event only after the resync that follows its
	// connection: once this (ignored) event is taken, that resync is over and cannot
	// race with what the test does next.
	r.rt.events <- Event{}
	return r
}

// check runs a round of the time-based rules and waits for its probes.
func (r *rig) check(ctx context.Context) { r.Supervisor.check(ctx).Wait() }

// waitFor waits until cond holds, failing the test after five seconds.
func (r *rig) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			instances := r.Instances() // before r.mu: OnTransition takes r.mu under the supervisor's lock
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("timed out waiting for %s; instances %+v; transitions %v", what, instances, r.transitions)
		}
		time.Sleep(time.Millisecond)
	}
}

// settle waits until no start or stop is in flight.
func (r *rig) settle(t *testing.T) {
	t.Helper()
	r.waitFor(t, "no action in flight", func() bool {
		r.Supervisor.mu.Lock()
		defer r.Supervisor.mu.Unlock()
		for _, in := range r.instances {
			if in.busy {
				return false
			}
		}
		return true
	})
}

// registeredPoolMember waits for the (one) warm-pool container to start, registers its
// blank map, and returns its pool id.
func (r *rig) registeredPoolMember(t *testing.T) string {
	t.Helper()
	var poolID string
	r.waitFor(t, "pool container started", func() bool {
		r.Supervisor.mu.Lock()
		defer r.Supervisor.mu.Unlock()
		for id, m := range r.pool {
			poolID = id
			return m.started
		}
		return false
	})
	if err := r.MapReady(context.Background(), orchestrator.MapRegistration{InstanceID: poolID}); err != nil {
		t.Fatal(err)
	}
	return poolID
}

// ready waits for instance id's container and registers its map.
func (r *rig) ready(t *testing.T, id string) orchestrator.Instance {
	t.Helper()
	r.settle(t)
	if err := r.MapReady(context.Background(), orchestrator.MapRegistration{InstanceID: id}); err != nil {
		t.Fatal(err)
	}
	inst, err := r.Gate(id)
	if err != nil {
		t.Fatalf("%s not ready: %v", id, err)
	}
	return inst
}

func (r *rig) saw(substr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, tr := range r.transitions {
		if strings.Contains(tr, substr) {
			return true
		}
	}
	return false
}

func (r *rig) state(id string) orchestrator.Instance {
	inst, _ := r.Instance(id)
	return inst
}

// create adds instance id (map "frontier", which has a template) through the admin path.
func (r *rig) create(t *testing.T, id string) {
	t.Helper()
	if _, err := r.Create(context.Background(), orchestrator.CreateInstance{InstanceID: id, MapID: "frontier"}); err != nil {
		t.Fatal(err)
	}
}
