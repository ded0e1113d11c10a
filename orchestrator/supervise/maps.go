package supervise

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
)

// MapReady records a map server's registration. A warm-pool map becomes available for
// handout; an instance's map is (again) told its MapConfig and becomes ready. A map
// may register before the runtime's start call returns: its registration waits for it.
func (s *Supervisor) MapReady(ctx context.Context, r orchestrator.MapRegistration) error {
	if !record.ValidName(r.InstanceID) {
		return apierr.Errorf(apierr.EBADREQUEST, "instanceId %q is not a valid id", r.InstanceID)
	}
	if mapgen.IsPoolID(r.InstanceID) {
		return s.poolReady(r)
	}
	if u, next := s.upgradeOf(r); u != nil {
		if !next {
			return nil // the previous container of an upgrade, handing its players over
		}
		return s.successorReady(ctx, s.instances[r.InstanceID], u)
	}
	in, cid, ports, err := s.registering(ctx, r.InstanceID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	cred := s.orchCredential(in.ident)
	s.mu.Unlock()
	start, err := s.startRequest(in)
	if err != nil {
		return fmt.Errorf("map-ready %q: %w", r.InstanceID, err)
	}
	if err := s.RPC.StartInstance(ctx, ports.ControlURL(), cred, start); err != nil {
		if code := apierr.Code(err); code == apierr.EMAPCONFIGREFUSED || code == apierr.EBADREQUEST {
			s.refused(in, cid, apierr.Message(err))
		}
		return fmt.Errorf("map-ready %q: start-instance: %w", r.InstanceID, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if in.ContainerID != cid {
		return apierr.Errorf(apierr.ECONFLICT, "instance %q was replaced while it registered", r.InstanceID)
	}
	in.GamePort, in.ControlPort, in.GameAddr = ports.Game, ports.Control, ports.GameAddr
	in.Registered, in.lastBeat, in.probeFails = true, s.Now(), 0
	switch in.State {
	case orchestrator.StateStarting, orchestrator.StateRestarting, orchestrator.StateReady:
		if in.lastActive.IsZero() || in.State != orchestrator.StateReady {
			in.lastActive = s.Now()
		}
		s.apply(in, evRegister, "map registered")
	}
	return nil
}

// upgradeOf returns the live upgrade a registration is part of, and whether it comes
// from the upgrade's next container (else from its previous one); nil for a
// registration of the instance's own container.
func (s *Supervisor) upgradeOf(r orchestrator.MapRegistration) (*upgrade, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[r.InstanceID]
	if !ok || r.Generation == "" || !in.upgrade.active() {
		return nil, false
	}
	u := in.upgrade
	switch {
	case u.status.Phase == orchestrator.UpgradeStarting && r.Generation == u.next.ident.Generation:
		return u, true
	case u.status.Phase == orchestrator.UpgradeHandingOff && r.Generation == u.prev.ident.Generation:
		return u, false
	}
	return nil, false
}

// refused handles a map whose game refused its MapConfig: the instance goes to
// config_refused with the game's message, and its container, which would refuse the
// same config again, is stopped and removed. Nothing is retried.
func (s *Supervisor) refused(in *instance, cid, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.ContainerID != cid || in.busy {
		return // replaced or being replaced meanwhile: the newer container decides
	}
	in.Registered = false
	if !s.apply(in, evConfigRefused, "the map refused its config: "+msg) {
		return
	}
	s.Log.Error("map refused its config", "instance", in.ID, "image", in.Image, "reason", msg)
	in.busy, in.expectExit = true, cid
	s.group.Go(func() error {
		ctx, cancel := context.WithTimeout(s.ctx, s.StopGrace+10*time.Second)
		defer cancel()
		_, err := s.Runtime.Stop(ctx, cid, s.StopGrace)
		if err == nil {
			err = s.Runtime.Remove(ctx, cid)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			s.Log.Warn("remove the container of a refused config", "instance", in.ID, "container", shortID(cid), "err", err)
		} else if in.ContainerID == cid {
			in.ContainerID, in.GamePort, in.ControlPort, in.GameAddr, in.ports = "", 0, 0, "", Ports{}
		}
		s.idle(in)
		return nil
	})
}

// startRequest is the /control/start-instance that tells in's map what it runs: its
// instance, its map and its whole MapConfig. An instance created without a config of
// its own (the default map, a template map a portal leads to) is sent its map's template,
// so that no map needs a copy of mapyard's templates to know its world.
func (s *Supervisor) startRequest(in *instance) (mapcontract.StartInstance, error) {
	config, err := s.Templates.StartConfig(in.ID, in.MapID, in.config)
	if err != nil {
		return mapcontract.StartInstance{}, fmt.Errorf("start-instance: %w", err)
	}
	return mapcontract.StartInstance{InstanceID: in.ID, MapID: in.MapID, Config: config}, nil
}

// registering returns the instance a map registers for with its current container and
// ports, waiting (bounded by ctx) while a start or handout is in flight.
func (s *Supervisor) registering(ctx context.Context, id string) (*instance, string, Ports, error) {
	for {
		s.mu.Lock()
		in, ok := s.instances[id]
		if !ok {
			s.mu.Unlock()
			return nil, "", Ports{}, apierr.Errorf(apierr.ENOTFOUND, "instance %q is not wanted by this orchestrator", id)
		}
		cid, ports, busy, leaving := in.ContainerID, in.ports, in.busy, in.busy && in.ContainerID != "" && in.ContainerID == in.expectExit
		ch := in.changed
		s.mu.Unlock()
		switch {
		case leaving:
			// The container being replaced may still heartbeat during its stop grace;
			// it must not make the instance ready again with ports about to vanish.
			return nil, "", Ports{}, apierr.Errorf(apierr.ECONFLICT, "instance %q is being replaced", id)
		case !busy && cid != "" && ports.Control != 0:
			return in, cid, ports, nil
		case !busy:
			return nil, "", Ports{}, apierr.Errorf(apierr.ENOTFOUND, "instance %q has no container", id)
		}
		// A start or handout is in flight: the registration waits for its outcome, so
		// a handout always finishes (and says so) before the map's own registration.
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, "", Ports{}, apierr.Errorf(apierr.ECONFLICT, "instance %q is still being started", id)
		}
	}
}

// Heartbeat records a heartbeat and reports whether the map is registered.
func (s *Supervisor) Heartbeat(instanceID, generation string, players int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.pool[instanceID]; ok {
		return m.registered
	}
	in, ok := s.instances[instanceID]
	if ok && in.State == orchestrator.StateStopping {
		// Stopped on purpose: SIGTERM is on its way. Told to register again, the map
		// would only be refused (409), and one that takes the refusal for its end exits
		// before it can save its players.
		return true
	}
	if !ok || !in.Registered {
		return false
	}
	switch u := in.upgrade; {
	case generation == "" || generation == in.ident.Generation:
		in.players = players
	case u.active() && generation == u.prev.ident.Generation:
		u.prevPlayers = players // the previous container, handing its players over
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
		return m.registered
	}
	in, ok := s.instances[instanceID]
	return ok && in.Registered
}

// Gate reports whether instanceID can take players now, and returns it when it can.
// It is the one readiness rule: the edge asks it before proxying a player, admission
// before redeeming a ticket, and Acquire before handing an instance out. Error codes:
// EMAPQUARANTINED while the instance is quarantined, EMAPUNAVAILABLE when it is
// unknown or in any state but ready.
func (s *Supervisor) Gate(instanceID string) (orchestrator.Instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[instanceID]
	if !ok {
		return orchestrator.Instance{}, apierr.Errorf(apierr.EMAPUNAVAILABLE, "no map instance %q", instanceID)
	}
	return in.Instance, s.gateLocked(in)
}

// gateLocked is Gate's rule for a known instance. The caller holds s.mu.
func (s *Supervisor) gateLocked(in *instance) error {
	switch in.State {
	case orchestrator.StateReady:
		return nil
	case orchestrator.StateQuarantined:
		return apierr.Errorf(apierr.EMAPQUARANTINED,
			"map instance %q keeps failing and is quarantined until %s", in.ID, in.until.UTC().Format(time.RFC3339))
	case orchestrator.StateImageMissing, orchestrator.StateConfigRefused, orchestrator.StateUnschedulable:
		return apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q cannot start (%s): %s", in.ID, in.State, in.Reason)
	default:
		return apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q is %s", in.ID, in.State)
	}
}

// Acquire returns instanceID once Gate lets players in. A stopped instance is started
// (lazy spawn); a quarantined one fails fast with EMAPQUARANTINED, and one whose image
// is missing (now, or found missing by the start Acquire made) with EMAPUNAVAILABLE: a
// player is not kept waiting for an image, nor does each join retry it. An instance
// that is not ready within StartTimeout (or ctx) fails with EMAPUNAVAILABLE; an unknown
// one with ENOTFOUND.
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
		err := s.gateLocked(in)
		switch {
		case err == nil:
			out := in.Instance
			s.mu.Unlock()
			return out, nil
		case apierr.Code(err) == apierr.EMAPQUARANTINED, in.State == orchestrator.StateImageMissing, in.State == orchestrator.StateConfigRefused, in.State == orchestrator.StateUnschedulable:
			s.mu.Unlock()
			return orchestrator.Instance{}, err
		case in.State == orchestrator.StateStopped && !in.busy:
			if in.status != orchestrator.StatusRunning {
				s.persistStatus(in, orchestrator.StatusRunning)
			}
			s.spawn(in, evStart, "needed by a join or transfer")
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
		out = append(out, s.viewLocked(in))
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
	return s.viewLocked(in), nil
}

// Ready reports whether the default instance is ready.
func (s *Supervisor) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[s.DefaultInstanceID]
	return ok && in.State == orchestrator.StateReady
}
