package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/mapyard/mapyard/mapserver/mapcontrol"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/apierr"
	"github.com/mapyard/mapyard/orchestrator/control"
)

// Store is where the supervisor keeps the wanted set, so that a restarted orchestrator
// knows which labelled containers to adopt. *sqlite.DB implements it.
type Store interface {
	PutInstance(ctx context.Context, w orchestrator.WantedInstance) error
	DeleteInstance(ctx context.Context, id string) error
	ListInstances(ctx context.Context) ([]orchestrator.WantedInstance, error)
}

// MapRPC is the part of the control RPC's map client the supervisor uses: health
// probes and handing an instance to a map.
type MapRPC interface {
	Health(ctx context.Context, baseURL string) (mapcontrol.MapHealth, error)
	StartInstance(ctx context.Context, baseURL string, r mapcontrol.StartInstance) error
}

var _ MapRPC = (*mapcontrol.MapClient)(nil)

// Defaults of the Supervisor's options, matching the ORCH_* defaults of DESIGN.md.
const (
	DefaultRestartWindow    = 60 * time.Second
	DefaultRestartMax       = 3
	DefaultQuarantine       = 60 * time.Second
	DefaultHeartbeatTimeout = 15 * time.Second
	DefaultProbeInterval    = 2 * time.Second
	DefaultProbeFailures    = 2
	DefaultStartTimeout     = 30 * time.Second
	DefaultStopGrace        = 10 * time.Second
	DefaultOrphanGrace      = 10 * time.Second
	DefaultIdleStop         = 10 * time.Minute
	DefaultPoolSize         = 1
)

// Supervisor keeps the map instances the orchestrator wants running as containers,
// watches their health (Docker events, HTTP probes, heartbeats), restarts them with
// backoff and quarantine, adopts running containers after an orchestrator restart,
// and keeps a warm pool of blank maps. It implements orchestrator.Maps.
//
// Create it with NewSupervisor, adjust the exported options, then Open it; Close it at
// shutdown. Close leaves map containers running on purpose.
type Supervisor struct {
	API   API
	Store Store // nil keeps the wanted set in memory only
	RPC   MapRPC
	Log   *slog.Logger
	Now   func() time.Time

	// Spec is the template of new map containers; the instance-specific name, labels
	// and environment are filled in per container.
	Spec MapSpec

	DefaultInstanceID string
	DefaultMapID      string

	Policy           RestartPolicy
	HeartbeatTimeout time.Duration
	ProbeInterval    time.Duration
	ProbeFailures    int           // consecutive failed /health probes that make a map unhealthy
	StartTimeout     time.Duration // starting → unhealthy; also bounds Acquire's wait
	StopGrace        time.Duration // SIGTERM → SIGKILL
	OrphanGrace      time.Duration // unknown labelled containers are removed after it
	IdleStop         time.Duration // non-default instances without players are stopped after it
	PoolSize         int
	AllowFaultEnv    bool // accept MAP_FAULT_* env in Create (tests only)

	Metrics *Metrics

	// OnTransition, when set, is called on every state change, with the supervisor's
	// lock held: it must return quickly and not call the supervisor. Tests and
	// benchmarks use it to observe transitions and their reasons.
	OnTransition func(instanceID string, from, to orchestrator.InstanceState, reason string)

	ctx    context.Context
	cancel context.CancelCauseFunc
	group  errgroup.Group

	mu        sync.Mutex
	instances map[string]*instance
	pool      map[string]*poolMember
	oom       map[string]bool // container ids with an oom event not yet followed by die
	poolKick  chan struct{}
}

var _ orchestrator.Maps = (*Supervisor)(nil)

// instance is the supervisor's private record of one wanted map instance.
type instance struct {
	orchestrator.Instance

	config     json.RawMessage
	env        []string // extra container env (fault injection in tests)
	status     string   // orchestrator.StatusRunning or StatusStopped (the wanted set)
	createdAt  time.Time
	lastBeat   time.Time
	lastActive time.Time // last heartbeat with players, or last Acquire
	probeFails int
	restarts   restartLog
	until      time.Time // end of quarantine
	busy       bool      // a start, restart or stop is in flight
	expectExit string    // container id that the supervisor itself is stopping
	changed    chan struct{}
}

// NewSupervisor returns a Supervisor over api creating containers from spec, with the
// default options.
func NewSupervisor(api API, spec MapSpec, rpc MapRPC, log *slog.Logger) *Supervisor {
	return &Supervisor{
		API: api, RPC: rpc, Log: log, Now: time.Now, Spec: spec,
		DefaultInstanceID: "default-1", DefaultMapID: "default",
		Policy:           RestartPolicy{Window: DefaultRestartWindow, Max: DefaultRestartMax, Quarantine: DefaultQuarantine},
		HeartbeatTimeout: DefaultHeartbeatTimeout,
		ProbeInterval:    DefaultProbeInterval,
		ProbeFailures:    DefaultProbeFailures,
		StartTimeout:     DefaultStartTimeout,
		StopGrace:        DefaultStopGrace,
		OrphanGrace:      DefaultOrphanGrace,
		IdleStop:         DefaultIdleStop,
		PoolSize:         DefaultPoolSize,
		instances:        make(map[string]*instance),
		pool:             make(map[string]*poolMember),
		oom:              make(map[string]bool),
		poolKick:         make(chan struct{}, 1),
	}
}

// Configure sets the options from the orchestrator's configuration.
func (s *Supervisor) Configure(cfg *orchestrator.Config) {
	s.DefaultInstanceID, s.DefaultMapID = cfg.DefaultInstanceID, cfg.DefaultMapID
	s.Spec.Deployment = cfg.Deployment
	s.Policy = RestartPolicy{
		Window:     orchestrator.Ms(cfg.MapRestartWindowMS),
		Max:        cfg.MapRestartMaxInWindow,
		Quarantine: orchestrator.Ms(cfg.MapQuarantineMS),
	}
	s.HeartbeatTimeout = orchestrator.Ms(cfg.HeartbeatTimeoutMS)
	s.ProbeInterval = orchestrator.Ms(cfg.MapProbeMS)
	s.StartTimeout = orchestrator.Ms(cfg.MapStartTimeoutMS)
	s.StopGrace = orchestrator.Ms(cfg.MapStopGraceMS)
	s.OrphanGrace = orchestrator.Ms(cfg.MapOrphanGraceMS)
	s.IdleStop = orchestrator.Ms(cfg.MapIdleStopMS)
	s.PoolSize = cfg.WarmPoolSize
	s.AllowFaultEnv = cfg.AllowFaultInjection
}

// Open loads the wanted set, adopts or removes the deployment's existing containers,
// starts wanted instances that have none, and starts the background loops: the events
// stream, probes and the warm pool. It returns once adoption is done.
func (s *Supervisor) Open(ctx context.Context) error {
	if s.API == nil || s.RPC == nil || s.Log == nil || s.Now == nil {
		return errors.New("supervisor: API, RPC, Log and Now are required")
	}
	if s.Spec.Deployment == "" {
		return errors.New("supervisor: Spec.Deployment is required")
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
		w := orchestrator.WantedInstance{ID: s.DefaultInstanceID, MapID: s.DefaultMapID, Status: orchestrator.StatusRunning, CreatedAt: s.Now()}
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
		s.addLocked(w, nil)
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
	w := orchestrator.WantedInstance{ID: in.ID, MapID: in.MapID, Config: in.config, Status: status, CreatedAt: in.createdAt}
	s.group.Go(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.persist(ctx, w); err != nil {
			s.Log.Error("persist map instance", "instance", w.ID, "err", err)
		}
		return nil
	})
}

func (s *Supervisor) addLocked(w orchestrator.WantedInstance, env []string) *instance {
	in := &instance{
		Instance:  orchestrator.Instance{ID: w.ID, MapID: w.MapID, State: orchestrator.StateStopped, Reason: "not started", Since: s.Now()},
		config:    w.Config,
		env:       env,
		status:    w.Status,
		createdAt: w.CreatedAt,
		changed:   make(chan struct{}),
	}
	s.instances[w.ID] = in
	s.Metrics.setState("", in.State)
	return in
}

// transition moves in to state `to`, logging and counting it, and wakes everything
// waiting for a change. The caller holds s.mu.
func (s *Supervisor) transition(in *instance, to orchestrator.InstanceState, reason string) {
	from := in.State
	in.State, in.Reason, in.Since = to, reason, s.Now()
	if from == to {
		return
	}
	s.Log.Info("map state", "instance", in.ID, "from", from, "to", to, "reason", reason, "container", shortID(in.ContainerID))
	s.Metrics.transition(from, to)
	if s.OnTransition != nil {
		s.OnTransition(in.ID, from, to, reason)
	}
	close(in.changed)
	in.changed = make(chan struct{})
}

// idle marks the end of an action on in and wakes those waiting for it. The caller
// holds s.mu.
func (s *Supervisor) idle(in *instance) {
	in.busy = false
	close(in.changed)
	in.changed = make(chan struct{})
}

// spawn starts (or restarts) in's container in the background unless an action is
// already in flight. The caller holds s.mu.
func (s *Supervisor) spawn(in *instance, state orchestrator.InstanceState, reason string) {
	if in.busy {
		return
	}
	in.busy = true
	in.Registered = false
	s.transition(in, state, reason)
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
	if err != nil && s.ctx.Err() == nil {
		s.Log.Error("map start failed", "instance", in.ID, "err", err)
		s.failed(in, "start failed: "+err.Error())
	}
}

func (s *Supervisor) replace(ctx context.Context, in *instance, old string) error {
	if old != "" {
		if err := StopMap(ctx, s.API, old, s.StopGrace); err != nil {
			return err
		}
	}
	// Whatever holds the instance's name (the old container, or a stale one) goes.
	if err := RemoveMap(ctx, s.API, orchestrator.ContainerName(in.ID)); err != nil {
		return err
	}
	if old != "" {
		if err := RemoveMap(ctx, s.API, old); err != nil {
			return err
		}
	}

	s.mu.Lock()
	var m *poolMember
	if len(in.env) == 0 {
		m = s.takePoolLocked()
	}
	spec := s.Spec
	spec.Name, spec.InstanceID, spec.MapID, spec.Pool = "", in.ID, in.MapID, false
	spec.Env = append(append(append([]string(nil), s.Spec.Env...), in.env...),
		"MAP_INSTANCE_ID="+in.ID, "MAP_MAP_ID="+in.MapID)
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
		if err := RemoveMap(ctx, s.API, m.containerID); err != nil {
			return err
		}
		if err := RemoveMap(ctx, s.API, orchestrator.ContainerName(in.ID)); err != nil {
			return err
		}
	}

	start := s.Now()
	id, err := CreateMap(ctx, s.API, spec)
	if err != nil {
		return err
	}
	// Record the container before starting it: the map may register before
	// ContainerStart returns, and its registration must find this container.
	s.mu.Lock()
	in.ContainerID, in.GamePort, in.ControlPort = id, 0, 0
	s.mu.Unlock()
	if err := StartMap(ctx, s.API, id); err != nil {
		return err
	}
	s.Log.Info("map container started", "instance", in.ID, "map", in.MapID, "container", shortID(id), "tookMs", ms(s.Now().Sub(start)))
	return nil
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
		s.transition(in, orchestrator.StateQuarantined,
			fmt.Sprintf("%s; %d restarts within %s, quarantined until %s", reason, s.Policy.count(&in.restarts, now), s.Policy.Window, until.Format(time.RFC3339)))
		return
	}
	in.Restarts++
	s.Metrics.Restarts.WithLabelValues(in.ID).Inc()
	s.spawn(in, orchestrator.StateRestarting, reason)
}

// unhealthy marks a ready map unhealthy and replaces it (counted as a failure). The
// caller holds s.mu.
func (s *Supervisor) unhealthy(in *instance, reason string) {
	if in.busy || (in.State != orchestrator.StateReady && in.State != orchestrator.StateStarting && in.State != orchestrator.StateRestarting) {
		return
	}
	s.transition(in, orchestrator.StateUnhealthy, reason)
	s.failed(in, reason)
}

// MapReady records a map server's registration. A warm-pool map becomes available for
// handout; an instance's map is (again) told its MapConfig and becomes ready.
func (s *Supervisor) MapReady(ctx context.Context, r control.MapReady) error {
	if !control.ValidName(r.InstanceID) {
		return apierr.Errorf(apierr.EBADREQUEST, "instanceId %q is not a valid id", r.InstanceID)
	}
	if strings.HasPrefix(r.InstanceID, orchestrator.PoolIDPrefix) {
		return s.poolReady(ctx, r)
	}
	s.mu.Lock()
	in, ok := s.instances[r.InstanceID]
	var cid string
	var leaving bool
	if ok {
		cid = in.ContainerID
		leaving = in.busy && cid != "" && cid == in.expectExit
	}
	s.mu.Unlock()
	if !ok {
		return apierr.Errorf(apierr.ENOTFOUND, "instance %q is not wanted by this orchestrator", r.InstanceID)
	}
	if leaving {
		// The container being replaced may still heartbeat during its stop grace; it
		// must not make the instance ready again with ports about to vanish.
		return apierr.Errorf(apierr.ECONFLICT, "instance %q is being replaced", r.InstanceID)
	}
	if cid == "" {
		return apierr.Errorf(apierr.ENOTFOUND, "instance %q has no container", r.InstanceID)
	}
	game, ctrl, err := PublishedPorts(ctx, s.API, cid)
	if err != nil {
		return fmt.Errorf("map-ready %q: %w", r.InstanceID, err)
	}
	if err := s.RPC.StartInstance(ctx, controlURL(ctrl), mapcontrol.StartInstance{InstanceID: in.ID, MapID: in.MapID, Config: in.config}); err != nil {
		return fmt.Errorf("map-ready %q: start-instance: %w", r.InstanceID, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if in.ContainerID != cid {
		return apierr.Errorf(apierr.ECONFLICT, "instance %q was replaced while it registered", r.InstanceID)
	}
	in.GamePort, in.ControlPort = game, ctrl
	in.Registered, in.lastBeat, in.probeFails = true, s.Now(), 0
	switch in.State {
	case orchestrator.StateStarting, orchestrator.StateRestarting, orchestrator.StateReady:
		if in.lastActive.IsZero() || in.State != orchestrator.StateReady {
			in.lastActive = s.Now()
		}
		s.transition(in, orchestrator.StateReady, "map registered")
	}
	return nil
}

// Heartbeat records a heartbeat and reports whether the map is registered.
func (s *Supervisor) Heartbeat(instanceID string, players int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.pool[instanceID]; ok {
		return m.ready
	}
	in, ok := s.instances[instanceID]
	if !ok || !in.Registered {
		return false
	}
	in.lastBeat = s.Now()
	if players > 0 {
		in.lastActive = in.lastBeat
	}
	return true
}

// Registered reports whether instanceID's map server registered with this orchestrator.
func (s *Supervisor) Registered(instanceID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.pool[instanceID]; ok {
		return m.ready
	}
	in, ok := s.instances[instanceID]
	return ok && in.Registered
}

// Acquire returns instanceID once it is ready. A stopped instance is started (lazy
// spawn); a quarantined one fails fast with EMAPQUARANTINED; an instance that is not
// ready within StartTimeout (or ctx) fails with EMAPUNAVAILABLE.
func (s *Supervisor) Acquire(ctx context.Context, instanceID string) (orchestrator.Instance, error) {
	timer := time.NewTimer(s.StartTimeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		in, ok := s.instances[instanceID]
		if !ok {
			s.mu.Unlock()
			return orchestrator.Instance{}, apierr.Errorf(apierr.ENOTFOUND, "no map instance %q", instanceID)
		}
		in.lastActive = s.Now()
		switch in.State {
		case orchestrator.StateReady:
			out := in.Instance
			s.mu.Unlock()
			return out, nil
		case orchestrator.StateQuarantined:
			until := in.until
			s.mu.Unlock()
			return orchestrator.Instance{}, apierr.Errorf(apierr.EMAPQUARANTINED,
				"map instance %q keeps failing and is quarantined until %s", instanceID, until.UTC().Format(time.RFC3339))
		case orchestrator.StateStopped:
			if !in.busy {
				if in.status != orchestrator.StatusRunning {
					s.persistStatus(in, orchestrator.StatusRunning)
				}
				s.spawn(in, orchestrator.StateStarting, "needed by a join or transfer")
			}
		}
		ch := in.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return orchestrator.Instance{}, apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q is not ready", instanceID)
		case <-timer.C:
			return orchestrator.Instance{}, apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q was not ready within %s", instanceID, s.StartTimeout)
		}
	}
}

// Instances lists every known instance, ordered by id.
func (s *Supervisor) Instances() []orchestrator.Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]orchestrator.Instance, 0, len(s.instances))
	for _, in := range s.instances {
		out = append(out, in.Instance)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Instance returns one instance by id.
func (s *Supervisor) Instance(id string) (orchestrator.Instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if !ok {
		return orchestrator.Instance{}, apierr.Errorf(apierr.ENOTFOUND, "no map instance %q", id)
	}
	return in.Instance, nil
}

// Ready reports whether the default instance is ready.
func (s *Supervisor) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[s.DefaultInstanceID]
	return ok && in.State == orchestrator.StateReady
}

// controlURL is the base URL of a map's control listener published on loopback.
func controlURL(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// ms is d in milliseconds with microsecond precision, for logs.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
