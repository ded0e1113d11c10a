package docker

import (
	"context"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/mapyard/mapyard/orchestrator"
)

// adopt reconciles the deployment's labelled containers with the wanted set when the
// orchestrator starts:
//   - a running container of a wanted instance is adopted: same container, no restart;
//     it is probed, and its map registers again when its next heartbeat is answered
//     "not registered";
//   - a running blank pool container is kept in the pool (up to PoolSize);
//   - an exited container is removed (a wanted instance gets a new one);
//   - a container of an unknown instance is stopped and removed after OrphanGrace,
//     unless the instance is created meanwhile;
//   - a wanted, running-status instance without a container is started.
func (s *Supervisor) adopt(ctx context.Context) error {
	list, err := ListMaps(ctx, s.API, s.Spec.Deployment)
	if err != nil {
		return err
	}
	var remove []string
	var orphans []container.Summary
	var probe []*instance

	s.mu.Lock()
	for _, c := range list {
		name := ""
		if len(c.Names) > 0 {
			name = c.Names[0]
		}
		id, ok := orchestrator.InstanceFromContainerName(name)
		running := c.State == "running"
		switch {
		case !ok:
			orphans = append(orphans, c)
		case strings.HasPrefix(id, orchestrator.PoolIDPrefix) && c.Labels[orchestrator.LabelPool] == "true":
			if running && len(s.pool) < s.PoolSize {
				s.pool[id] = &poolMember{id: id, containerID: c.ID, started: true}
				s.Metrics.Adopted.Inc()
				s.Log.Info("adopted warm pool container", "pool", id, "container", shortID(c.ID))
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
			in.ContainerID = c.ID
			s.transition(in, orchestrator.StateStarting, "adopted running container")
			s.Metrics.Adopted.Inc()
			probe = append(probe, in)
		}
	}
	s.mu.Unlock()

	for _, id := range remove {
		s.Log.Info("removing exited map container", "container", shortID(id))
		if err := RemoveMap(ctx, s.API, id); err != nil {
			return err
		}
	}
	for _, in := range probe {
		s.probeAdopted(ctx, in)
	}
	s.mu.Lock()
	for _, in := range s.instances {
		if in.ContainerID == "" && in.status == orchestrator.StatusRunning {
			s.spawn(in, orchestrator.StateStarting, "wanted and not running")
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

// probeAdopted reads an adopted container's ports and probes its /health: a healthy map
// is ready at once (players keep playing); one that does not answer is left starting,
// and the usual start timeout applies.
func (s *Supervisor) probeAdopted(ctx context.Context, in *instance) {
	game, ctrl, err := PublishedPorts(ctx, s.API, in.ContainerID)
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = s.RPC.Health(pctx, controlURL(ctrl))
		cancel()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.Log.Warn("adopted map not healthy yet", "instance", in.ID, "err", err)
		return
	}
	now := s.Now()
	in.GamePort, in.ControlPort = game, ctrl
	in.lastBeat, in.lastActive = now, now
	s.transition(in, orchestrator.StateReady, "adopted; health probe ok")
	s.Log.Info("adopted map container", "instance", in.ID, "container", shortID(in.ContainerID))
}

// removeOrphan stops (cleanly) and removes a labelled container nobody wants, after
// OrphanGrace, unless its instance became wanted meanwhile.
func (s *Supervisor) removeOrphan(c container.Summary) {
	name := ""
	if len(c.Names) > 0 {
		name = c.Names[0]
	}
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
	err := StopMap(ctx, s.API, c.ID, s.StopGrace)
	if err == nil {
		err = RemoveMap(ctx, s.API, c.ID)
	}
	if err != nil {
		s.Log.Warn("remove unknown map container", "container", shortID(c.ID), "err", err)
		return
	}
	s.Metrics.OrphansRemoved.Inc()
	s.Log.Info("removed unknown map container", "container", shortID(c.ID), "name", name)
}
