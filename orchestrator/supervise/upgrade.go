package supervise

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/keys"
)

// A live upgrade moves an instance to another image without taking its players out of
// play. The next container starts beside the running one (same instance, a new
// generation), registers and builds its world; only then does it become the
// instance's container, the one new players and the route table reach, and the
// previous container is asked to hand its players over (/control/handoff). It does
// so at one tick per character, through handoff transfers the orchestrator grants only
// while the instance is handing off, and the edge moves each player's socket to the
// next container. The previous container is stopped once it answered (or, for a map
// that does not serve the handoff, at once: its players rejoin, the restart path).
// Until the next container is the instance's, a failure (it does not start, register
// or take its config in time) removes it and leaves the players where they are.

// handoffTimeout bounds one /control/handoff call: a map answers once every character
// it holds was granted its transfer, a group commit away per batch.
const handoffTimeout = 30 * time.Second

// container is one of an upgrade's two containers.
type container struct {
	id    string
	ports Ports
	ident keys.Identity
}

// upgrade is an instance's live upgrade. Its fields are guarded by Supervisor.mu.
type upgrade struct {
	status orchestrator.UpgradeStatus
	next   container
	prev   container
	// ready is closed when the next container registered and took its config; err
	// says why it cannot (then failed is closed instead).
	ready, failed chan struct{}
	err           error
	// prevPlayers is how many characters the previous container held at its last
	// heartbeat: those a handoff that fails leaves to rejoin.
	prevPlayers int
}

// active reports whether u still runs.
func (u *upgrade) active() bool {
	return u != nil && u.status.Phase != orchestrator.UpgradeDone && u.status.Phase != orchestrator.UpgradeFailed
}

// Upgrade starts the live upgrade of instanceID to image: the next container is
// created and started before it returns (so an image the engine lacks is refused at
// once, and nothing is touched), and the rest runs in the background.
func (s *Supervisor) Upgrade(ctx context.Context, instanceID, image string) (orchestrator.Instance, error) {
	if image == "" {
		return orchestrator.Instance{}, apierr.Errorf(apierr.EBADREQUEST, "image is required")
	}
	s.mu.Lock()
	in, ok := s.instances[instanceID]
	switch {
	case !ok:
		s.mu.Unlock()
		return orchestrator.Instance{}, apierr.Errorf(apierr.ENOTFOUND, "no map instance %q", instanceID)
	case !s.allowed(image):
		s.mu.Unlock()
		return orchestrator.Instance{}, s.notAllowed(image)
	case in.upgrade.active():
		s.mu.Unlock()
		return orchestrator.Instance{}, apierr.Errorf(apierr.ECONFLICT, "map instance %q is being upgraded to %s already", instanceID, in.upgrade.status.Image)
	case in.busy || in.State != orchestrator.StateReady || in.ContainerID == "":
		st := in.State
		s.mu.Unlock()
		return orchestrator.Instance{}, apierr.Errorf(apierr.ECONFLICT, "map instance %q is %s: only a ready map is upgraded live (a stopped one starts on its new image after a restart)", instanceID, st)
	}
	u := &upgrade{ready: make(chan struct{}), failed: make(chan struct{}),
		status: orchestrator.UpgradeStatus{From: in.Image, Image: image, Phase: orchestrator.UpgradeStarting, StartedAt: s.Now()}}
	in.upgrade = u
	s.mu.Unlock()

	ident, creds, err := s.mint(in.ID)
	if err == nil {
		s.mu.Lock()
		spec := s.instanceSpec(in, image, ident, creds)
		spec.Successor = true
		u.next.ident = ident
		s.mu.Unlock()
		var c Container
		if c, err = s.Runtime.Start(ctx, spec); err == nil {
			s.mu.Lock()
			u.next.id, u.next.ports = c.ID, c.Ports
			s.changedLocked(in) // a registration of the next container may be waiting for its ports
			out := s.viewLocked(in)
			s.mu.Unlock()
			s.Log.Info("map upgrade started", "instance", in.ID, "from", u.status.From, "to", image, "next", shortID(c.ID))
			s.group.Go(func() error {
				s.runUpgrade(in, u)
				return nil
			})
			return out, nil
		}
	}
	s.mu.Lock()
	if in.upgrade == u {
		in.upgrade = nil // refused before anything changed: no status to keep
	}
	s.mu.Unlock()
	if errors.Is(err, ErrImageMissing) {
		return orchestrator.Instance{}, apierr.Errorf(apierr.EIMAGEMISSING, "image %q is missing on the engine: build, pull or load it first", image)
	}
	return orchestrator.Instance{}, fmt.Errorf("upgrade %q: start the next container: %w", instanceID, err)
}

// UpgradeAll upgrades every ready instance of image from to image to, at most parallel
// at once.
func (s *Supervisor) UpgradeAll(ctx context.Context, from, to string, parallel int) ([]string, error) {
	if from == "" || to == "" {
		return nil, apierr.Errorf(apierr.EBADREQUEST, "from and to are required")
	}
	if !s.allowed(to) {
		return nil, s.notAllowed(to)
	}
	parallel = max(parallel, 1)
	var ids []string
	for _, inst := range s.Instances() {
		if inst.Image == from && inst.State == orchestrator.StateReady {
			ids = append(ids, inst.ID)
		}
	}
	slots := make(chan struct{}, parallel)
	s.group.Go(func() error {
		for _, id := range ids {
			select {
			case slots <- struct{}{}:
			case <-s.ctx.Done():
				return nil
			}
			if _, err := s.Upgrade(s.ctx, id, to); err != nil {
				s.Log.Warn("map upgrade not started", "instance", id, "to", to, "err", err)
				<-slots
				continue
			}
			s.group.Go(func() error {
				defer func() { <-slots }()
				s.waitUpgrade(s.ctx, id)
				return nil
			})
		}
		return nil
	})
	return ids, nil
}

// waitUpgrade returns once instanceID's upgrade ended (or ctx did).
func (s *Supervisor) waitUpgrade(ctx context.Context, instanceID string) {
	for {
		s.mu.Lock()
		in, ok := s.instances[instanceID]
		if !ok || !in.upgrade.active() {
			s.mu.Unlock()
			return
		}
		ch := in.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// HandingOff reports whether instanceID's previous container hands its players over.
func (s *Supervisor) HandingOff(instanceID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[instanceID]
	return ok && in.upgrade.active() && in.upgrade.status.Phase == orchestrator.UpgradeHandingOff
}

// successorReady is MapReady for an upgrade's next container: it is told its instance
// and config, and the upgrade goes on. A config its game refuses fails the upgrade.
func (s *Supervisor) successorReady(ctx context.Context, in *instance, u *upgrade) error {
	s.mu.Lock()
	for u.next.id == "" && u.active() {
		// It registered before Start returned its ports.
		ch := in.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return apierr.Errorf(apierr.EUNAVAILABLE, "instance %q: the next container is still starting; register again", in.ID)
		}
		s.mu.Lock()
	}
	next := u.next
	start, err := s.startRequest(in)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if err := s.RPC.StartInstance(ctx, next.ports.ControlURL(), s.orchCredential(next.ident), start); err != nil {
		if code := apierr.Code(err); code == apierr.EMAPCONFIGREFUSED || code == apierr.EBADREQUEST {
			s.mu.Lock()
			s.failUpgrade(u, fmt.Errorf("the next container refused the config: %s", apierr.Message(err)))
			s.mu.Unlock()
		}
		return fmt.Errorf("map-ready %q (next container): start-instance: %w", in.ID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-u.ready:
	case <-u.failed:
	default:
		close(u.ready)
	}
	return nil
}

// failUpgrade records why u cannot go on before the switch. The caller holds s.mu.
func (s *Supervisor) failUpgrade(u *upgrade, err error) {
	select {
	case <-u.ready:
	case <-u.failed:
	default:
		u.err = err
		close(u.failed)
	}
}

// runUpgrade waits for the next container, switches the instance to it, has the
// previous one hand its players over, and removes the previous one.
func (s *Supervisor) runUpgrade(in *instance, u *upgrade) {
	timer := time.NewTimer(s.StartTimeout)
	defer timer.Stop()
	var err error
	select {
	case <-u.ready:
	case <-u.failed:
		err = u.err
	case <-timer.C:
		err = fmt.Errorf("the next container was not ready within %s", s.StartTimeout)
	case <-s.ctx.Done():
		return
	}
	if err != nil {
		s.abandonUpgrade(in, u, err)
		return
	}

	// The switch: from here on the next container is the instance's.
	s.mu.Lock()
	if in.upgrade != u || in.busy || in.State != orchestrator.StateReady {
		st := in.State
		s.mu.Unlock()
		s.abandonUpgrade(in, u, fmt.Errorf("the map became %s during the upgrade", st))
		return
	}
	u.prev, u.prevPlayers = container{id: in.ContainerID, ports: in.ports, ident: in.ident}, in.players
	in.ContainerID, in.ports, in.ident = u.next.id, u.next.ports, u.next.ident
	in.GamePort, in.ControlPort, in.GameAddr = u.next.ports.Game, u.next.ports.Control, u.next.ports.GameAddr
	in.Registered, in.lastBeat, in.probeFails, in.pooled, in.players = true, s.Now(), 0, false, 0
	in.image = u.status.Image
	s.setImageLocked(in, u.status.Image)
	u.status.Phase = orchestrator.UpgradeHandingOff
	s.changedLocked(in)
	w := orchestrator.WantedInstance{ID: in.ID, MapID: in.MapID, Config: in.config, Image: in.image, Env: in.env, Status: in.status, CreatedAt: in.createdAt}
	prev, gen := u.prev, u.next.ident.Generation
	s.mu.Unlock()
	s.Log.Info("map upgrade: next container is the instance's; handing players over", "instance", in.ID, "next", shortID(u.next.id), "previous", shortID(prev.id))
	pctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	if err := s.persist(pctx, w); err != nil {
		s.Log.Error("persist the upgraded image", "instance", in.ID, "err", err)
	}
	cancel()

	// The handoff; a map that does not serve it is stopped (its players rejoin).
	hctx, cancel := context.WithTimeout(s.ctx, handoffTimeout)
	ans, err := s.RPC.Handoff(hctx, prev.ports.ControlURL(), s.orchCredential(prev.ident), mapcontract.Handoff{Generation: gen})
	if err == nil && ans.Remaining > 0 {
		ans, err = s.RPC.Handoff(hctx, prev.ports.ControlURL(), s.orchCredential(prev.ident), mapcontract.Handoff{Generation: gen})
	}
	cancel()
	s.mu.Lock()
	if err != nil {
		u.status.Fallback, u.status.Remaining = true, u.prevPlayers
		why := apierr.Message(err)
		if apierr.Code(err) == apierr.EINTERNAL {
			// Not the map's answer but the call's failure (the container died, or does
			// not serve the route): what the operator reads is what happened.
			why = err.Error()
		}
		u.status.Error = fmt.Sprintf("the previous container did not hand its players over (%s): stopped, its players rejoin", why)
		s.Log.Warn("map upgrade: handoff failed; stopping the previous container", "instance", in.ID, "err", err)
	} else {
		u.status.Moved, u.status.Transferred, u.status.Remaining = ans.Moved, ans.Transferred, ans.Remaining
	}
	s.mu.Unlock()

	sctx, cancel := context.WithTimeout(s.ctx, s.StopGrace+10*time.Second)
	if _, err := s.Runtime.Stop(sctx, prev.id, s.StopGrace); err != nil {
		s.Log.Warn("map upgrade: stop the previous container", "instance", in.ID, "container", shortID(prev.id), "err", err)
	}
	if err := s.Runtime.Remove(sctx, prev.id); err != nil {
		s.Log.Warn("map upgrade: remove the previous container", "instance", in.ID, "container", shortID(prev.id), "err", err)
	}
	if err := s.Runtime.Assign(sctx, u.next.id, in.ID); err != nil {
		s.Log.Warn("map upgrade: name the next container", "instance", in.ID, "container", shortID(u.next.id), "err", err)
	}
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endUpgradeLocked(in, u, orchestrator.UpgradeDone)
	s.Log.Info("map upgraded", "instance", in.ID, "from", u.status.From, "to", u.status.Image,
		"moved", u.status.Moved, "transferred", u.status.Transferred, "remaining", u.status.Remaining, "fallback", u.status.Fallback,
		"tookMs", ms(u.status.EndedAt.Sub(u.status.StartedAt)))
}

// abandonUpgrade removes an upgrade's next container before the switch: the players
// never left the instance's container.
func (s *Supervisor) abandonUpgrade(in *instance, u *upgrade, cause error) {
	s.Log.Error("map upgrade failed; the map stays on its image", "instance", in.ID, "to", u.status.Image, "err", cause)
	if u.next.id != "" {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), s.StopGrace+10*time.Second)
		if err := s.Runtime.Remove(ctx, u.next.id); err != nil {
			s.Log.Warn("map upgrade: remove the next container", "instance", in.ID, "container", shortID(u.next.id), "err", err)
		}
		cancel()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u.status.Error = cause.Error()
	s.endUpgradeLocked(in, u, orchestrator.UpgradeFailed)
}

// endUpgradeLocked ends u with phase. The caller holds s.mu.
func (s *Supervisor) endUpgradeLocked(in *instance, u *upgrade, phase string) {
	now := s.Now()
	u.status.Phase, u.status.EndedAt = phase, &now
	s.Metrics.upgraded(phase)
	s.changedLocked(in)
}

// changedLocked wakes everything waiting on a change of in. The caller holds s.mu.
func (s *Supervisor) changedLocked(in *instance) {
	close(in.changed)
	in.changed = make(chan struct{})
}

// viewLocked is in as the admin API and the route table see it. The caller holds s.mu.
func (s *Supervisor) viewLocked(in *instance) orchestrator.Instance {
	out := in.Instance
	out.Generation = in.ident.Generation
	if in.upgrade != nil {
		st := in.upgrade.status
		out.Upgrade = &st
	}
	return out
}

// splitSuccessors takes the live upgrades' next containers out of list.
func splitSuccessors(list []Container) (rest, successors []Container) {
	for _, c := range list {
		if c.Successor && !c.Pool {
			successors = append(successors, c)
		} else {
			rest = append(rest, c)
		}
	}
	return rest, successors
}

// resumedUpgrade is the upgrade an earlier orchestrator left running, found at start-up
// as a running next container c beside the instance's own.
func resumedUpgrade(in *instance, c Container, now time.Time) *upgrade {
	return &upgrade{ready: make(chan struct{}), failed: make(chan struct{}),
		next:   container{id: c.ID, ports: c.Ports, ident: c.Identity},
		status: orchestrator.UpgradeStatus{From: in.Image, Image: c.Image, Phase: orchestrator.UpgradeStarting, StartedAt: now}}
}

// resumeUpgrade carries on, after an orchestrator restart, an upgrade the previous
// orchestrator left running: forward, whatever phase it was in. The next container is
// told its instance again (idempotent), and the upgrade switches to it and has the
// previous container hand over whoever it still holds (a handoff may be asked again);
// a next container that does not answer is removed, and the players stay where they
// are. So every player ends on exactly one container, and the upgrade either finishes
// or is rolled back.
func (s *Supervisor) resumeUpgrade(in *instance, u *upgrade) {
	s.Log.Info("resuming a map upgrade an earlier orchestrator left running", "instance", in.ID, "to", u.status.Image, "next", shortID(u.next.id))
	s.group.Go(func() error {
		ctx, cancel := context.WithTimeout(s.ctx, s.StartTimeout)
		defer cancel()
		if err := s.successorReady(ctx, in, u); err != nil {
			s.mu.Lock()
			s.failUpgrade(u, err)
			s.mu.Unlock()
		}
		return nil
	})
	s.group.Go(func() error {
		s.runUpgrade(in, u)
		return nil
	})
}
