// Package supervise keeps mapyard's map instances running: the lifecycle state machine
// of every instance, restarts with backoff and quarantine, the warm pool, idle stops,
// adoption of running containers after an orchestrator restart, and the one readiness
// gate that joins, transfers and the edge ask. It runs containers through a narrow
// Runtime interface (Docker's lives in package docker) and knows nothing of names,
// labels or the engine, so its rules are tested over an in-memory runtime.
package supervise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/keys"
)

// Store is where the supervisor keeps the wanted set, so that a restarted orchestrator
// knows which containers to adopt. *sqlite.DB implements it.
type Store interface {
	PutInstance(ctx context.Context, w orchestrator.WantedInstance) error
	DeleteInstance(ctx context.Context, id string) error
	ListInstances(ctx context.Context) ([]orchestrator.WantedInstance, error)
	// SetInstanceRestarts records an instance's restart count (Instance.Restarts),
	// which ListInstances returns, so that the count outlives the process. The stored
	// count never goes down, whatever order the writes arrive in.
	SetInstanceRestarts(ctx context.Context, id string, n int) error
}

// MapRPC is the part of the control RPC's map client the supervisor uses: health
// probes and handing an instance to a map.
// Each call presents the credential of the container it reaches.
type MapRPC interface {
	Health(ctx context.Context, baseURL, cred string) (mapcontract.MapHealth, error)
	StartInstance(ctx context.Context, baseURL, cred string, r mapcontract.StartInstance) error
	Handoff(ctx context.Context, baseURL, cred string, r mapcontract.Handoff) (mapcontract.HandoffAnswer, error)
}

var _ MapRPC = (*mapcontract.MapClient)(nil)

// Supervisor keeps the map instances the orchestrator wants running as containers of a
// Runtime, watches their health (runtime events, HTTP probes, heartbeats), restarts
// them with backoff and quarantine, adopts running containers after an orchestrator
// restart, and keeps a warm pool of blank maps. It implements orchestrator.Maps.
//
// Create it with New, adjust the exported fields, then Open it; Close it at shutdown.
// Close leaves map containers running on purpose.
type Supervisor struct {
	Runtime Runtime
	Store   Store // nil keeps the wanted set in memory only
	RPC     MapRPC
	// Credentials mints each container's credentials (required).
	Credentials Credentials
	Log         *slog.Logger
	Now         func() time.Time

	// Options are the policies; they may be changed until Open.
	Options

	Metrics *Metrics

	// OnTransition, when set, is called on every state change, with the supervisor's
	// lock held: it must return quickly and not call the supervisor. Tests and
	// benchmarks use it to observe transitions and their reasons.
	OnTransition func(instanceID string, from, to orchestrator.InstanceState, reason string)

	ctx    context.Context
	cancel context.CancelCauseFunc
	group  errgroup.Group
	// adopted is set once Open adopted the running containers (see Adopted).
	adopted atomic.Bool

	mu        sync.Mutex
	instances map[string]*instance
	pool      map[string]*poolMember
	poolKick  chan struct{}
	// warm holds the images besides Image whose spares the pool keeps: those of maps
	// started (or wanted running) in this process's life.
	warm map[string]bool
	// lacking holds the images the engine did not have when the pool last tried to
	// start a spare of them: no spares of them are tried again until a map of the
	// image starts, so a missing image never turns into a refill loop.
	lacking map[string]bool
	// nodes are the nodes that can take a map now, on a runtime with many (see Nodes);
	// nil on one engine. unplaceable holds, by image and node, until when the pool does
	// not try a spare there again: the image's constraints exclude that node.
	nodes       []string
	unplaceable map[[2]string]time.Time
}

var _ orchestrator.Maps = (*Supervisor)(nil)

// instance is the supervisor's private record of one wanted map instance.
type instance struct {
	orchestrator.Instance

	config     json.RawMessage
	image      string        // as its template or create named it; "" = Options.Image
	env        []string      // extra container env (fault injection in tests)
	status     string        // orchestrator.StatusRunning or StatusStopped (the wanted set)
	ports      Ports         // of ContainerID, known before the map registers
	ident      keys.Identity // of ContainerID: whose credentials it holds
	createdAt  time.Time
	lastBeat   time.Time
	lastActive time.Time // last heartbeat with players, or last Acquire
	players    int       // as the last heartbeat of ContainerID said
	probeFails int
	probing    bool // a /health probe of it is in flight (probe.go)
	restarts   restartLog
	until      time.Time // end of quarantine
	busy       bool      // a start, restart or stop is in flight
	expectExit string    // container id that the supervisor itself is stopping
	// pooled: ContainerID was handed out from the warm pool, so its labels and
	// environment name its pool id, not the instance (see Options.Rehome).
	pooled bool
	// cold: the next start creates a container for the instance instead of taking
	// one from the warm pool (an operator's create or restart, a rehome).
	cold bool
	// upgrade is the instance's live upgrade, while it runs (and its status after).
	upgrade *upgrade
	// avoid is the node its last container stopped answering on (lost, or unhealthy),
	// which its next start avoids where another node can take it, until one starts.
	avoid   string
	changed chan struct{}
}

// New returns a Supervisor running maps on rt with opts, handing each container
// credentials minted by creds.
func New(rt Runtime, rpc MapRPC, creds Credentials, log *slog.Logger, opts Options) *Supervisor {
	return &Supervisor{
		Runtime: rt, RPC: rpc, Credentials: creds, Log: log, Now: time.Now, Options: opts,
		instances: make(map[string]*instance),
		pool:      make(map[string]*poolMember),
		poolKick:  make(chan struct{}, 1),
		warm:      make(map[string]bool),
		lacking:   make(map[string]bool),

		unplaceable: make(map[[2]string]time.Time),
	}
}

// Open loads the wanted set, adopts or removes the deployment's existing containers,
// starts wanted instances that have none, and starts the background loops: the events
// stream, probes and the warm pool. It returns once adoption is done.
func (s *Supervisor) Open(ctx context.Context) error {
	if s.Runtime == nil || s.RPC == nil || s.Credentials == nil || s.Log == nil || s.Now == nil {
		return errors.New("supervisor: Runtime, RPC, Credentials, Log and Now are required")
	}
	if err := s.Options.Validate(); err != nil {
		return fmt.Errorf("supervisor: %w", err)
	}
	if s.Metrics == nil {
		s.Metrics = NewMetrics(nil)
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())

	if err := s.loadWanted(ctx); err != nil {
		return err
	}
	if err := s.adopt(ctx); err != nil {
		return err
	}
	s.adopted.Store(true)
	s.group.Go(func() error { s.watchEvents(s.ctx); return nil })
	s.group.Go(func() error { s.probeLoop(s.ctx); return nil })
	s.group.Go(func() error { s.poolLoop(s.ctx); return nil })
	return nil
}

// Close stops the background loops and waits for actions in flight. Containers keep
// running: the next orchestrator adopts them.
func (s *Supervisor) Close() error {
	if s.cancel == nil {
		return nil
	}
	s.cancel(errors.New("supervisor closed"))
	return s.group.Wait()
}

// loadWanted reads the wanted set and makes sure the default instance is in it.
func (s *Supervisor) loadWanted(ctx context.Context) error {
	var wanted []orchestrator.WantedInstance
	if s.Store != nil {
		var err error
		if wanted, err = s.Store.ListInstances(ctx); err != nil {
			return err
		}
	}
	hasDefault := false
	for _, w := range wanted {
		hasDefault = hasDefault || w.ID == s.DefaultInstanceID
	}
	if !hasDefault {
		w := orchestrator.WantedInstance{ID: s.DefaultInstanceID, MapID: s.DefaultMapID, Image: s.DefaultMapImage, Status: orchestrator.StatusRunning, CreatedAt: s.Now()}
		if err := s.persist(ctx, w); err != nil {
			return err
		}
		wanted = append(wanted, w)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range wanted {
		if w.ID == s.DefaultInstanceID {
			w.Status = orchestrator.StatusRunning // the default map is always wanted
		}
		in := s.addLocked(w)
		if w.Status == orchestrator.StatusRunning {
			s.warmLocked(in.Image) // it starts (or is adopted) now
		}
	}
	return nil
}

func (s *Supervisor) persist(ctx context.Context, w orchestrator.WantedInstance) error {
	if s.Store == nil {
		return nil
	}
	return s.Store.PutInstance(ctx, w)
}

func (s *Supervisor) persistStatus(in *instance, status string) {
	in.status = status
	w := orchestrator.WantedInstance{ID: in.ID, MapID: in.MapID, Config: in.config, Image: in.image, Env: in.env, Status: status, CreatedAt: in.createdAt}
	s.group.Go(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.persist(ctx, w); err != nil {
			s.Log.Error("persist map instance", "instance", w.ID, "err", err)
		}
		return nil
	})
}

// persistRestarts writes in's restart count in the background, like persistStatus. The
// caller holds s.mu.
func (s *Supervisor) persistRestarts(in *instance) {
	if s.Store == nil {
		return
	}
	id, n := in.ID, in.Restarts
	s.group.Go(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Store.SetInstanceRestarts(ctx, id, n); err != nil {
			s.Log.Error("persist map restarts", "instance", id, "restarts", n, "err", err)
		}
		return nil
	})
}

func (s *Supervisor) addLocked(w orchestrator.WantedInstance) *instance {
	in := &instance{
		Instance: orchestrator.Instance{ID: w.ID, MapID: w.MapID, Image: s.imageOf(w.Image), State: orchestrator.StateStopped, Reason: "not started", Since: s.Now(),
			Restarts: w.Restarts},
		config:    w.Config,
		image:     w.Image,
		env:       w.Env,
		status:    w.Status,
		createdAt: w.CreatedAt,
		changed:   make(chan struct{}),
	}
	s.instances[w.ID] = in
	s.Metrics.setState(in.Image, "", in.State)
	return in
}

// idle marks the end of an action on in and wakes those waiting for it. The caller
// holds s.mu.
func (s *Supervisor) idle(in *instance) {
	in.busy = false
	s.changedLocked(in)
}

// spawn starts (or restarts) in's container in the background unless an action is
// already in flight. The caller holds s.mu.
func (s *Supervisor) spawn(in *instance, ev event, reason string) {
	if in.busy || !s.apply(in, ev, reason) {
		return
	}
	in.busy = true
	in.Registered = false
	old := in.ContainerID
	if old != "" {
		in.expectExit = old
	}
	s.group.Go(func() error {
		s.runStart(in, old)
		return nil
	})
}

// runStart replaces in's container: it stops and removes the old one (if any), then
// hands the instance a warm-pool container or creates a new one.
func (s *Supervisor) runStart(in *instance, old string) {
	ctx, cancel := context.WithTimeout(s.ctx, s.StartTimeout+s.StopGrace+10*time.Second)
	defer cancel()
	err := s.replace(ctx, in, old)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.idle(in)
	if err == nil || s.ctx.Err() != nil {
		return
	}
	if reason, ok := s.imageUnavailable(in, err); ok {
		// Not a crash and not retried: the image does not appear by waiting.
		in.Registered = false
		s.apply(in, evImageMissing, reason)
		return
	}
	if errors.Is(err, ErrUnschedulable) {
		// Nor is a placement no node satisfies: it changes with the nodes or the
		// constraints, which an operator changes, and then restarts the map.
		in.Registered = false
		s.Log.Error("map cannot be placed", "instance", in.ID, "err", err)
		s.apply(in, evUnschedulable, fmt.Sprintf("%v; add a node that satisfies it or change ORCH_SWARM_CONSTRAINTS, then restart the map (POST /admin/maps/%s/restart)", err, in.ID))
		return
	}
	s.Log.Error("map start failed", "instance", in.ID, "err", err)
	s.failed(in, "start failed: "+err.Error())
}

// replace stops and removes in's old container (if any), then hands the instance a
// warm-pool container or starts a new one.
func (s *Supervisor) replace(ctx context.Context, in *instance, old string) error {
	if old != "" {
		if _, err := s.Runtime.Stop(ctx, old, s.StopGrace); err != nil {
			return err
		}
		if err := s.Runtime.Remove(ctx, old); err != nil {
			return err
		}
	}

	s.mu.Lock()
	// The old container is gone: a registration from now on comes from the new one.
	in.ContainerID, in.GamePort, in.ControlPort, in.GameAddr, in.ports = "", 0, 0, "", Ports{}
	in.pooled = false
	// The new container runs the image the instance names now (an adopted one may have
	// run another), and only one the host allows.
	image := s.imageOf(in.image)
	s.setImageLocked(in, image)
	if !s.allowed(image) {
		in.cold = false
		s.mu.Unlock()
		return s.notAllowed(image)
	}
	var m *poolMember
	if len(in.env) == 0 && !in.cold {
		m = s.takePoolLocked(image, in.avoid)
	}
	in.cold = false
	s.mu.Unlock()

	if m != nil {
		err := s.handout(ctx, in, m)
		if err == nil {
			return nil
		}
		s.Log.Warn("warm pool handout failed; starting a new container", "instance", in.ID, "pool", m.id, "err", err)
		s.mu.Lock()
		in.expectExit = m.containerID // its death is ours, not a crash of the instance
		s.mu.Unlock()
		if err := s.Runtime.Remove(ctx, m.containerID); err != nil {
			return err
		}
		s.mu.Lock()
		in.ContainerID, in.GamePort, in.ControlPort, in.GameAddr, in.ports, in.pooled = "", 0, 0, "", Ports{}, false
		s.mu.Unlock()
	}

	ident, creds, err := s.mint(in.ID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	spec := s.instanceSpec(in, image, ident, creds)
	// The new container may register before Start returns: its credential is current
	// from now on, and the old container's (stopped above) no longer is.
	in.ident = ident
	s.mu.Unlock()

	start := s.Now()
	c, err := s.Runtime.Start(ctx, spec)
	if err != nil {
		return err
	}
	s.mu.Lock()
	in.ContainerID, in.ports, in.avoid = c.ID, c.Ports, ""
	s.imageStartedLocked(image)
	s.mu.Unlock()
	s.Log.Info("map container started", "instance", in.ID, "map", in.MapID, "image", image, "container", shortID(c.ID), "tookMs", ms(s.Now().Sub(start)))
	return nil
}

// instanceSpec is the Spec of a container created for in, running image with the
// credentials creds minted for ident: the host's map environment, the instance's own
// (fault injection in tests), the credentials and the instance's names. The caller
// holds s.mu.
func (s *Supervisor) instanceSpec(in *instance, image string, ident keys.Identity, creds []string) Spec {
	env := append(append(append([]string(nil), s.Env...), in.env...), creds...)
	env = append(env, mapcontract.EnvInstanceID+"="+in.ID, mapcontract.EnvMapID+"="+in.MapID)
	return Spec{InstanceID: in.ID, MapID: in.MapID, Image: image, Generation: ident.Generation, KeyID: s.Credentials.KeyID(), Env: env, Avoid: in.avoid}
}

// failed handles a map that crashed, turned unhealthy or could not start: it is
// restarted if the restart policy allows, else quarantined. The caller holds s.mu.
func (s *Supervisor) failed(in *instance, reason string) {
	in.Registered = false
	now := s.Now()
	ok, until := s.Policy.allow(&in.restarts, now)
	if !ok {
		in.until = until
		s.Metrics.Quarantines.Inc()
		s.apply(in, evQuarantine,
			fmt.Sprintf("%s; %d restarts within %s, quarantined until %s", reason, s.Policy.count(&in.restarts, now), s.Policy.Window, until.Format(time.RFC3339)))
		return
	}
	in.Restarts++
	s.Metrics.Restarts.WithLabelValues(in.ID).Inc()
	s.persistRestarts(in)
	s.spawn(in, evRestart, reason)
}

// unhealthy marks a ready map unhealthy and replaces it (counted as a failure). The
// caller holds s.mu.
func (s *Supervisor) unhealthy(in *instance, reason string) {
	if in.busy || (in.State != orchestrator.StateReady && in.State != orchestrator.StateStarting && in.State != orchestrator.StateRestarting) {
		return
	}
	s.apply(in, evUnhealthy, reason)
	in.avoid = in.ports.Node
	s.failed(in, reason)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// ms is d in milliseconds with microsecond precision, for logs.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
