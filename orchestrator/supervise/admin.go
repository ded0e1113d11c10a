package supervise

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
)

// Create adds a wanted instance and starts it; Settle waits for the start's outcome.
// An image the host does not allow is refused (EIMAGENOTALLOWED) before
// anything is recorded or started; one the engine does not have is found by the start,
// and the instance goes to image_missing; a config the map's game refuses undoes the
// create (EMAPCONFIGREFUSED, with the game's reason).
func (s *Supervisor) Create(ctx context.Context, r orchestrator.CreateInstance) (orchestrator.Instance, error) {
	if !record.ValidName(r.InstanceID) || mapgen.IsPoolID(r.InstanceID) {
		return orchestrator.Instance{}, apierr.Errorf(apierr.EBADREQUEST, "instanceId %q must be %s and not start with %q", r.InstanceID, record.IDRule, mapgen.PoolIDPrefix)
	}
	if !record.ValidName(r.MapID) {
		return orchestrator.Instance{}, apierr.Errorf(apierr.EBADREQUEST, "mapId %q must be %s", r.MapID, record.IDRule)
	}
	if len(r.Config) > 0 && !json.Valid(r.Config) {
		return orchestrator.Instance{}, apierr.Errorf(apierr.EBADREQUEST, "config is not valid JSON")
	}
	for _, kv := range r.Env {
		if !s.AllowFaultEnv {
			return orchestrator.Instance{}, apierr.Errorf(apierr.EBADREQUEST, "env is accepted only with ORCH_ALLOW_FAULT_INJECTION=1")
		}
		if k, _, ok := strings.Cut(kv, "="); !ok || !strings.HasPrefix(k, mapcontract.EnvFaultPrefix) {
			return orchestrator.Instance{}, apierr.Errorf(apierr.EBADREQUEST, "env %q: only MAP_FAULT_* variables are accepted", k)
		}
	}
	if r.Image != "" && !s.allowed(r.Image) {
		return orchestrator.Instance{}, s.notAllowed(r.Image)
	}
	w := orchestrator.WantedInstance{ID: r.InstanceID, MapID: r.MapID, Config: r.Config, Image: r.Image, Env: r.Env, Status: orchestrator.StatusRunning, CreatedAt: s.Now()}
	s.mu.Lock()
	if _, ok := s.instances[r.InstanceID]; ok {
		s.mu.Unlock()
		return orchestrator.Instance{}, apierr.Errorf(apierr.ECONFLICT, "map instance %q exists", r.InstanceID)
	}
	in := s.addLocked(w)
	in.busy = true // nobody starts it before it is persisted
	in.cold = r.Cold
	s.mu.Unlock()

	err := s.persist(ctx, w)
	s.mu.Lock()
	s.idle(in)
	if err != nil {
		delete(s.instances, r.InstanceID)
		s.Metrics.setState(in.Image, in.State, "")
		s.mu.Unlock()
		return orchestrator.Instance{}, err
	}
	s.spawn(in, evCreate, "created")
	out := in.Instance
	s.mu.Unlock()
	return out, nil
}

// Settle waits (bounded by ctx and StartTimeout) for a just created instance's start
// to end and returns the instance as it is then: ready, image_missing, or still
// starting when the start outlasts the wait. A map whose game refused its config is
// undone, its wanted row and the instance forgotten, and the game's reason returned
// (EMAPCONFIGREFUSED): the operator sees why at once, instead of a map that never
// becomes ready. Admin create calls it after Create.
func (s *Supervisor) Settle(ctx context.Context, instanceID string) (orchestrator.Instance, error) {
	s.mu.Lock()
	in, ok := s.instances[instanceID]
	if !ok {
		s.mu.Unlock()
		return orchestrator.Instance{}, apierr.Errorf(apierr.ENOTFOUND, "no map instance %q", instanceID)
	}
	return s.settle(ctx, in)
}

// settle is Settle for in. The caller holds s.mu; settle releases it.
func (s *Supervisor) settle(ctx context.Context, in *instance) (orchestrator.Instance, error) {
	timer := time.NewTimer(s.StartTimeout)
	defer timer.Stop()
	for {
		switch st := in.State; {
		case st == orchestrator.StateConfigRefused:
			return s.undo(ctx, in)
		case st != orchestrator.StateStarting && st != orchestrator.StateRestarting:
			out := in.Instance
			s.mu.Unlock()
			return out, nil
		}
		ch := in.changed
		s.mu.Unlock()
		select {
		case <-ch:
			s.mu.Lock()
		case <-ctx.Done():
			return s.Instance(in.ID)
		case <-s.ctx.Done():
			return s.Instance(in.ID)
		case <-timer.C:
			return s.Instance(in.ID)
		}
	}
}

// undo forgets a created instance its map refused: it waits for its container to be
// removed, then deletes its wanted row and the instance. The caller holds s.mu; undo
// releases it.
func (s *Supervisor) undo(ctx context.Context, in *instance) (orchestrator.Instance, error) {
	reason := in.Reason
	for in.busy {
		ch := in.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return orchestrator.Instance{}, apierr.Errorf(apierr.EMAPCONFIGREFUSED, "%s", reason)
		}
		s.mu.Lock()
	}
	if in.ContainerID != "" {
		// Its container could not be removed: keep the instance, config_refused, so
		// an operator sees it (and a stop or restart clears it).
		s.mu.Unlock()
		return orchestrator.Instance{}, apierr.Errorf(apierr.EMAPCONFIGREFUSED, "%s", reason)
	}
	delete(s.instances, in.ID)
	s.Metrics.setState(in.Image, in.State, "")
	s.mu.Unlock()
	if s.Store != nil {
		if err := s.Store.DeleteInstance(context.WithoutCancel(ctx), in.ID); err != nil {
			s.Log.Error("forget a refused map instance", "instance", in.ID, "err", err)
		}
	}
	return orchestrator.Instance{}, apierr.Errorf(apierr.EMAPCONFIGREFUSED, "%s", reason)
}

// Restart replaces the instance's container. An operator's restart is not a crash: it
// does not count against the restart policy, and it lifts a quarantine or an
// image_missing state (the start tries the image again). The new container is created
// for the instance (never taken from the warm pool), so its labels and environment
// name it.
func (s *Supervisor) Restart(ctx context.Context, instanceID string) error {
	in, err := s.lockIdle(ctx, instanceID)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if in.upgrade.active() {
		return apierr.Errorf(apierr.ECONFLICT, "map instance %q is being upgraded; restart it once the upgrade ended", instanceID)
	}
	in.restarts.reset()
	in.cold = true
	if in.status != orchestrator.StatusRunning {
		s.persistStatus(in, orchestrator.StatusRunning)
	}
	s.spawn(in, evRestart, "restart requested")
	return nil
}

// Stop stops the instance cleanly and waits for it: SIGTERM, then SIGKILL after
// StopGrace. The exit is never counted as a crash, and the instance stays stopped
// until a join needs it (Acquire) or an operator restarts it.
func (s *Supervisor) Stop(ctx context.Context, instanceID string) error {
	return s.stop(ctx, instanceID, "stop requested")
}

func (s *Supervisor) stop(ctx context.Context, instanceID, reason string) error {
	in, err := s.lockIdle(ctx, instanceID)
	if err != nil {
		return err
	}
	if in.upgrade.active() {
		s.mu.Unlock()
		return apierr.Errorf(apierr.ECONFLICT, "map instance %q is being upgraded; stop it once the upgrade ended", instanceID)
	}
	if in.status != orchestrator.StatusStopped {
		s.persistStatus(in, orchestrator.StatusStopped)
	}
	if in.State == orchestrator.StateStopped {
		s.mu.Unlock()
		return nil
	}
	in.busy, in.Registered = true, false
	cid := in.ContainerID
	in.expectExit = cid
	s.apply(in, evStop, reason)
	s.mu.Unlock()

	if cid != "" {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.StopGrace+10*time.Second)
		var exit Exit
		exit, err = s.Runtime.Stop(sctx, cid, s.StopGrace)
		if err == nil {
			// Record how it ended (0 after a clean flush, 137 when the grace ran out)
			// before the container and its state are gone.
			if exit.Code >= 0 {
				code := exit.Code
				s.mu.Lock()
				in.LastExitCode, in.OOMKilled = &code, exit.OOM
				s.mu.Unlock()
			}
			err = s.Runtime.Remove(sctx, cid)
		}
		cancel()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idle(in)
	if err != nil {
		// Not left "stopping", which nothing acts on: "stopped" with the container
		// kept, so the next start stops and removes it before creating a new one.
		s.apply(in, evStopped, "stop failed: "+err.Error())
		return fmt.Errorf("stop map %q: %w", instanceID, err)
	}
	in.ContainerID, in.GamePort, in.ControlPort, in.GameAddr = "", 0, 0, ""
	if in.State == orchestrator.StateStopping {
		s.apply(in, evStopped, reason)
	}
	return nil
}

// lockIdle waits until no start or stop of instanceID is in flight and returns the
// instance with s.mu held. An operator's stop or restart right after a start waits for
// it instead of failing. Error codes: ENOTFOUND; ECONFLICT when the action in flight
// outlasts ctx or StartTimeout+StopGrace.
func (s *Supervisor) lockIdle(ctx context.Context, instanceID string) (*instance, error) {
	timer := time.NewTimer(s.StartTimeout + s.StopGrace)
	defer timer.Stop()
	for {
		s.mu.Lock()
		in, ok := s.instances[instanceID]
		if !ok {
			s.mu.Unlock()
			return nil, apierr.Errorf(apierr.ENOTFOUND, "no map instance %q", instanceID)
		}
		if !in.busy {
			return in, nil
		}
		ch, st := in.changed, in.State
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, apierr.Errorf(apierr.ECONFLICT, "map instance %q is %s; try again", instanceID, st)
		case <-timer.C:
			return nil, apierr.Errorf(apierr.ECONFLICT, "map instance %q is %s; try again", instanceID, st)
		}
	}
}
