package admission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/admission"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

const (
	secret  = "test-host-secret-0123456789"
	authKey = "Zq3v9LrT0pXw2YbN5cHs8KdA" // 24 URL-safe characters
)

// fakeMaps is a hand-written fake supervisor: instances have a settable state, and
// Acquire answers from it the way the real one does.
type fakeMaps struct {
	mu      sync.Mutex
	states  map[string]orchestrator.InstanceState
	mapIDs  map[string]string // map of an instance not named "<mapId>-1"
	created []string
	configs map[string]json.RawMessage // configs of created instances
	images  map[string]string          // images of created instances
	// handingOff holds the instances being upgraded live, whose handoff transfers
	// are granted.
	handingOff map[string]bool
}

func newFakeMaps(ids ...string) *fakeMaps {
	m := &fakeMaps{states: map[string]orchestrator.InstanceState{}, configs: map[string]json.RawMessage{}, mapIDs: map[string]string{}, images: map[string]string{}}
	for _, id := range ids {
		m.states[id] = orchestrator.StateReady
	}
	return m
}

func (m *fakeMaps) set(id string, st orchestrator.InstanceState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.states[id] = st
}

func (m *fakeMaps) Instance(id string) (orchestrator.Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.states[id]
	if !ok {
		return orchestrator.Instance{}, apierr.Errorf(apierr.ENOTFOUND, "no instance %q", id)
	}
	mapID, ok := m.mapIDs[id]
	if !ok {
		mapID = id[:len(id)-2]
	}
	return orchestrator.Instance{ID: id, MapID: mapID, State: st}, nil
}

// Gate answers from the instance's state the way the supervisor's gate does.
func (m *fakeMaps) Gate(id string) (orchestrator.Instance, error) {
	inst, err := m.Instance(id)
	if err != nil {
		return inst, apierr.Errorf(apierr.EMAPUNAVAILABLE, "no instance %q", id)
	}
	return m.gate(inst)
}

func (m *fakeMaps) Acquire(ctx context.Context, id string) (orchestrator.Instance, error) {
	inst, err := m.Instance(id)
	if err != nil {
		return inst, err // ENOTFOUND, as the supervisor answers
	}
	return m.gate(inst)
}

func (m *fakeMaps) gate(inst orchestrator.Instance) (orchestrator.Instance, error) {
	switch inst.State {
	case orchestrator.StateReady:
		return inst, nil
	case orchestrator.StateQuarantined:
		return inst, apierr.Errorf(apierr.EMAPQUARANTINED, "%q is quarantined", inst.ID)
	default:
		return inst, apierr.Errorf(apierr.EMAPUNAVAILABLE, "%q is %s", inst.ID, inst.State)
	}
}

// HandingOff reports the instances a test marked as handing their players over.
func (m *fakeMaps) HandingOff(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.handingOff[id]
}

func (m *fakeMaps) Create(ctx context.Context, r orchestrator.CreateInstance) (orchestrator.Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.states[r.InstanceID]; ok {
		return orchestrator.Instance{}, apierr.Errorf(apierr.ECONFLICT, "%q exists", r.InstanceID)
	}
	m.states[r.InstanceID] = orchestrator.StateReady
	m.created = append(m.created, r.InstanceID)
	m.configs[r.InstanceID] = r.Config
	m.images[r.InstanceID] = r.Image
	return orchestrator.Instance{ID: r.InstanceID, MapID: r.MapID, State: orchestrator.StateReady}, nil
}

func (m *fakeMaps) remove(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.states, id)
}

// clock is a settable clock for TTL tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type env struct {
	svc   *admission.Service
	db    *sqlite.DB
	maps  *fakeMaps
	clock *clock
	logs  *bytes.Buffer
	path  string
	// defaultInstance is the deployment's default instance; "" is default-1.
	defaultInstance string
}

// newEnv opens a real SQLite store in a temporary directory and a Service over it, with
// maps default-1, frontier-1 and cave-1 ready.
func newEnv(tb testing.TB) *env {
	tb.Helper()
	e := &env{maps: newFakeMaps("default-1", "frontier-1", "cave-1"), clock: &clock{t: time.UnixMilli(1_800_000_000_000)}, logs: &bytes.Buffer{}}
	e.path = filepath.Join(tb.TempDir(), "mapyard.db")
	e.open(tb)
	return e
}

// newEnvDefault is newEnv for a deployment whose default instance is id
// (ORCH_DEFAULT_INSTANCE_ID), running the default map, beside frontier-1 and cave-1.
func newEnvDefault(tb testing.TB, id string) *env {
	tb.Helper()
	e := &env{maps: newFakeMaps(id, "frontier-1", "cave-1"), clock: &clock{t: time.UnixMilli(1_800_000_000_000)}, logs: &bytes.Buffer{}, defaultInstance: id}
	e.maps.mapIDs[id] = "default"
	e.path = filepath.Join(tb.TempDir(), "mapyard.db")
	e.open(tb)
	return e
}

func (e *env) open(tb testing.TB) {
	tb.Helper()
	e.db = sqlite.NewDB(e.path)
	e.db.Now = e.clock.Now
	if err := e.db.Open(); err != nil {
		tb.Fatal(err)
	}
	db := e.db
	tb.Cleanup(func() { db.Close() })
	log := slog.New(slog.NewJSONHandler(&lockedWriter{w: e.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	def := e.defaultInstance
	if def == "" {
		def = "default-1"
	}
	e.svc = admission.NewService(testutil.Root(tb, secret), e.db, e.maps, def, log)
	e.svc.Now = e.clock.Now
}

// restart closes the store and opens a new store and Service on the same file, as an
// orchestrator restart does.
func (e *env) restart(tb testing.TB) {
	tb.Helper()
	if err := e.db.Close(); err != nil {
		tb.Fatal(err)
	}
	e.open(tb)
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (e *env) join(tb testing.TB, key string) *public.JoinResponse {
	tb.Helper()
	res, err := e.svc.Join(context.Background(), public.JoinRequest{AuthKey: key})
	if err != nil {
		tb.Fatalf("join: %v", err)
	}
	return res
}

func (e *env) redeem(tb testing.TB, instance, tok string) *mapcontract.RedeemResult {
	tb.Helper()
	res, err := e.svc.Redeem(context.Background(), mapcontract.RedeemRequest{InstanceID: instance, Token: tok})
	if err != nil {
		tb.Fatalf("redeem at %s: %v", instance, err)
	}
	return res
}

func wantCode(tb testing.TB, err error, code string) {
	tb.Helper()
	if got := apierr.Code(err); got != code {
		tb.Fatalf("code %q (%v), want %q", got, err, code)
	}
}
