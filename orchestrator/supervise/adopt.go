package supervise

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
)

// adopt reconciles the runtime's containers with the wanted set when the orchestrator
// starts:
//   - a running container of a wanted instance is adopted: same container, no restart;
//     it is probed, and its map registers again when its next heartbeat is answered
//     "not registered";
//   - a running pool container is asked for its /health: a blank one is kept in the
//     pool (up to PoolSize of its image, if the pool keeps spares of that image); one
//     that was handed an instance just before the last orchestrator died (and not yet
//     assigned) is adopted for that instance;
//   - an exited container is removed (a wanted instance gets a new one);
//   - a container of an unknown instance is stopped and removed after OrphanGrace,
//     unless the instance is created meanwhile;
//   - a wanted, running-status instance without a container is started.
func (s *Supervisor) adopt(ctx context.Context) error {
	list, err := s.Runtime.List(ctx)
	if err != nil {
		return err
	}
	var remove []string
	var orphans, pooled []Container
	var probe []*instance

	list, successors := splitSuccessors(list)
	s.mu.Lock()
	for _, c := range list {
		id, running := c.InstanceID, c.Running
		switch {
		case id == "":
			orphans = append(orphans, c)
		case mapgen.IsPoolID(id) && c.Pool:
			if running && s.current(c) {
				pooled = append(pooled, c)
			} else {
				remove = append(remove, c.ID)
			}
		case !running:
			remove = append(remove, c.ID)
		default:
			in, wanted := s.instances[id]
			if !wanted || in.ContainerID != "" {
				orphans = append(orphans, c)
				continue
			}
			in.ContainerID, in.ports, in.ident, in.pooled = c.ID, c.Ports, c.Identity, c.Pool
			// An adopted map keeps the image it runs, even if the host's default (or the
			// allowed list) changed meanwhile: adoption starts nothing.
			s.setImageLocked(in, c.Image)
			s.warmLocked(c.Image)
			if !s.current(c) {
				// Started by an earlier version (the host secret in its environment)
				// or under a rotated root: its credentials cannot be verified, so it is
				// replaced (stopped cleanly, then started anew with its own).
				s.spawn(in, evRestart, "replacing a container without credentials of this orchestrator")
				continue
			}
			s.apply(in, evAdopt, "adopted running container")
			s.Metrics.Adopted.Inc()
			probe = append(probe, in)
		}
	}
	var resumed []*instance
	for _, c := range successors {
		in, wanted := s.instances[c.InstanceID]
		switch {
		case !c.Running || !s.current(c):
			remove = append(remove, c.ID)
		case !wanted:
			orphans = append(orphans, c)
		case in.ContainerID == "":
			// Its predecessor is gone: the upgrade had handed over, and it is the
			// instance's container, only not yet named so.
			in.ContainerID, in.ports, in.ident = c.ID, c.Ports, c.Identity
			s.setImageLocked(in, c.Image)
			s.apply(in, evAdopt, "adopted running container (a live upgrade's next container)")
			s.Metrics.Adopted.Inc()
			s.assignLater(in.ID, c.ID)
			probe = append(probe, in)
		default:
			in.upgrade = resumedUpgrade(in, c, s.Now())
			resumed = append(resumed, in)
		}
	}
	s.mu.Unlock()

	for _, c := range pooled {
		in, orphan, drop := s.adoptPooled(ctx, c)
		switch {
		case in != nil:
			probe = append(probe, in)
		case orphan:
			orphans = append(orphans, c)
		case drop:
			remove = append(remove, c.ID)
		}
	}
	for _, id := range remove {
		s.Log.Info("removing exited map container", "container", shortID(id))
		if err := s.Runtime.Remove(ctx, id); err != nil {
			return err
		}
	}
	for _, in := range probe {
		s.probeAdopted(ctx, in)
	}
	for _, in := range resumed {
		s.resumeUpgrade(in, in.upgrade)
	}
	s.mu.Lock()
	for _, in := range s.instances {
		if in.ContainerID == "" && in.status == orchestrator.StatusRunning {
			s.spawn(in, evStart, "wanted and not running")
		}
	}
	s.mu.Unlock()
	for _, c := range orphans {
		s.group.Go(func() error {
			s.removeOrphan(c)
			return nil
		})
	}
	return nil
}

// adoptPooled sorts out one running pool container by what its /health says it runs:
// its pool id (kept in the pool, or dropped when the pool is full or it does not
// answer), a wanted instance without a container (adopted for it, and assigned), or
// anything else (an orphan).
func (s *Supervisor) adoptPooled(ctx context.Context, c Container) (in *instance, orphan, drop bool) {
	poolID := c.InstanceID
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	h, err := s.RPC.Health(pctx, c.Ports.ControlURL(), s.orchCredential(c.Identity))
	cancel()
	if err != nil {
		s.Log.Info("pool container does not answer; removing", "pool", poolID, "err", err)
		return nil, false, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	image := s.imageOf(c.Image) // containers of versions before images had a label ran the default
	if h.InstanceID == poolID {
		n := 0
		for _, m := range s.pool {
			if m.image == image && m.node == c.Ports.Node {
				n++
			}
		}
		if n >= s.PoolSize || !slices.Contains(s.poolImagesLocked(), image) {
			return nil, false, true
		}
		s.pool[poolID] = &poolMember{id: poolID, image: image, node: c.Ports.Node, containerID: c.ID, ports: c.Ports, ident: c.Identity, started: true, startedAt: s.Now()}
		s.Metrics.Adopted.Inc()
		s.Log.Info("adopted warm pool container", "pool", poolID, "image", image, "container", shortID(c.ID))
		return nil, false, false
	}
	in, wanted := s.instances[h.InstanceID]
	if !wanted || in.ContainerID != "" {
		return nil, true, false
	}
	in.ContainerID, in.ports, in.ident, in.pooled = c.ID, c.Ports, c.Identity, true
	s.setImageLocked(in, image)
	s.apply(in, evAdopt, "adopted running container (handed out from the pool)")
	s.Metrics.Adopted.Inc()
	s.assignLater(in.ID, c.ID)
	return in, false, false
}

// probeAdopted probes an adopted container's /health: a healthy map is ready at once
// (players keep playing); one that does not answer is left starting, and the usual
// start timeout applies.
func (s *Supervisor) probeAdopted(ctx context.Context, in *instance) {
	s.mu.Lock()
	ports, cred := in.ports, s.orchCredential(in.ident)
	s.mu.Unlock()
	var err error
	if ports.Game == 0 || ports.Control == 0 {
		err = fmt.Errorf("the runtime reports no published ports (%+v)", ports)
	} else {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = s.RPC.Health(pctx, ports.ControlURL(), cred)
		cancel()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.Log.Warn("adopted map not healthy yet", "instance", in.ID, "err", err)
		return
	}
	now := s.Now()
	in.GamePort, in.ControlPort, in.GameAddr = ports.Game, ports.Control, ports.GameAddr
	in.lastBeat, in.lastActive = now, now
	s.apply(in, evHealthy, "adopted; health probe ok")
	s.Log.Info("adopted map container", "instance", in.ID, "container", shortID(in.ContainerID))
}

// removeOrphan stops (cleanly) and removes a container nobody wants, after
// OrphanGrace, unless its instance became wanted meanwhile.
func (s *Supervisor) removeOrphan(c Container) {
	name := c.Name
	s.Log.Info("unknown map container; removing after grace", "container", shortID(c.ID), "name", name, "grace", s.OrphanGrace)
	select {
	case <-s.ctx.Done():
		return
	case <-time.After(s.OrphanGrace):
	}
	s.mu.Lock()
	owned := s.byContainerLocked(c.ID) != nil
	s.mu.Unlock()
	if owned {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.StopGrace+10*time.Second)
	defer cancel()
	_, err := s.Runtime.Stop(ctx, c.ID, s.StopGrace)
	if err == nil {
		err = s.Runtime.Remove(ctx, c.ID)
	}
	if err != nil {
		s.Log.Warn("remove unknown map container", "container", shortID(c.ID), "err", err)
		return
	}
	s.Metrics.OrphansRemoved.Inc()
	s.Log.Info("removed unknown map container", "container", shortID(c.ID), "name", name)
}
