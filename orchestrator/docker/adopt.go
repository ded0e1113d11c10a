package docker

import (
	"context"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/mapyard/mapyard/mapserver/mapcontrol"
	"github.com/mapyard/mapyard/orchestrator"
)

// adopt reconciles the deployment's labelled containers with the wanted set when the
// orchestrator starts:
//   - a running container of a wanted instance is adopted: same container, no restart;
//     it is probed, and its map registers again when its next heartbeat is answered
//     "not registered";
//   - a running pool-named container is asked for its /health: a blank one is kept in
//     the pool (up to PoolSize); one that was handed an instance just before the last
//     orchestrator died (and not yet renamed) is adopted for that instance;
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
	var orphans, pooled []container.Summary
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
			if running {
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
			in.ContainerID = c.ID
			s.transition(in, orchestrator.StateStarting, "adopted running container")
			s.Metrics.Adopted.Inc()
			probe = append(probe, in)
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

// adoptPooled sorts out one running pool-named container by what its /health says
// it runs: its pool id (kept in the pool, or dropped when the pool is full or it does
// not answer), a wanted instance without a container (adopted for it, and renamed), or
// anything else (an orphan).
func (s *Supervisor) adoptPooled(ctx context.Context, c container.Summary) (in *instance, orphan, drop bool) {
	poolID, _ := orchestrator.InstanceFromContainerName(c.Names[0])
	_, ctrl, err := PublishedPorts(ctx, s.API, c.ID)
	var h mapcontrol.MapHealth
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		h, err = s.RPC.Health(pctx, controlURL(ctrl))
		cancel()
	}
	if err != nil {
		s.Log.Info("pool container does not answer; removing", "pool", poolID, "err", err)
		return nil, false, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.InstanceID == poolID {
		if len(s.pool) >= s.PoolSize {
			return nil, false, true
		}
		s.pool[poolID] = &poolMember{id: poolID, containerID: c.ID, started: true, startedAt: s.Now()}
		s.Metrics.Adopted.Inc()
		s.Log.Info("adopted warm pool container", "pool", poolID, "container", shortID(c.ID))
		return nil, false, false
	}
	in, wanted := s.instances[h.InstanceID]
	if !wanted || in.ContainerID != "" {
		return nil, true, false
	}
	in.ContainerID = c.ID
	s.transition(in, orchestrator.StateStarting, "adopted running container (handed out from the pool)")
	s.Metrics.Adopted.Inc()
	s.renameLater(in.ID, c.ID)
	return in, false, false
}

// probeAdopted reads an adopted container's ports and probes its /health: a healthy map
// is ready at once (players keep playing); one that does not answer is left starting,
// and the usual start timeout applies.
func (s *Supervisor) probeAdopted(ctx context.Context, in *instance) {
	game, ctrl, err := PublishedPorts(ctx, s.API, in.ContainerID)
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = s.RPC.Health(pctx, controlURL(ctrl))
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
