package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	"github.com/mapyard/mapyard/mapserver/mapcontrol"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/apierr"
	"github.com/mapyard/mapyard/orchestrator/control"
)

// poolMember is one blank warm-pool container. It is named mapyard-map-pool-<hex>,
// labelled io.mapyard.pool=true and io.mapyard.instance=pool-<hex>, and registers
// under its pool id. Handing it an instance renames it to mapyard-map-<instance>; its
// labels cannot change, so the container name is what says which instance it runs.
type poolMember struct {
	id          string // pool-<hex>
	containerID string
	started     bool // ContainerStart returned
	startedAt   time.Time
	ready       bool // the blank map registered
	gamePort    int
	ctrlPort    int
}

// PoolStatus is what the admin API shows of the warm pool.
type PoolStatus struct {
	Size  int `json:"size"`
	Ready int `json:"ready"`
	Want  int `json:"want"`
}

// Pool reports the warm pool's size and how many members are ready for handout.
func (s *Supervisor) Pool() PoolStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := PoolStatus{Size: len(s.pool), Want: s.PoolSize}
	for _, m := range s.pool {
		if m.ready {
			st.Ready++
		}
	}
	return st
}

// kickPool asks the pool loop to refill without blocking.
func (s *Supervisor) kickPool() {
	select {
	case s.poolKick <- struct{}{}:
	default:
	}
}

// poolLoop keeps PoolSize blank containers until ctx ends, refilling when kicked and
// retrying failures with a delay.
func (s *Supervisor) poolLoop(ctx context.Context) {
	s.kickPool()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.poolKick:
		}
		for ctx.Err() == nil {
			s.mu.Lock()
			short := len(s.pool) < s.PoolSize
			s.mu.Unlock()
			if !short {
				break
			}
			if err := s.addPoolMember(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.Log.Warn("warm pool refill failed; retrying", "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(2 * time.Second):
				}
			}
		}
	}
}

func (s *Supervisor) addPoolMember(ctx context.Context) error {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	m := &poolMember{id: orchestrator.PoolIDPrefix + hex.EncodeToString(b[:])}
	spec := s.Spec
	spec.Name, spec.InstanceID, spec.MapID, spec.Pool = orchestrator.ContainerName(m.id), m.id, "pool", true
	spec.Env = append(append([]string(nil), s.Spec.Env...), "MAP_INSTANCE_ID="+m.id, "MAP_MAP_ID=pool", "MAP_BLANK=true")
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	id, err := CreateMap(cctx, s.API, spec)
	if err != nil {
		return err
	}
	m.containerID = id
	s.mu.Lock()
	s.pool[m.id] = m
	s.mu.Unlock()
	if err := StartMap(cctx, s.API, id); err != nil {
		s.dropPoolMember(m.id)
		_ = RemoveMap(context.WithoutCancel(ctx), s.API, id)
		return err
	}
	s.mu.Lock()
	m.started, m.startedAt = true, s.Now()
	s.mu.Unlock()
	s.Log.Info("warm pool container started", "pool", m.id, "container", shortID(id))
	return nil
}

func (s *Supervisor) dropPoolMember(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pool[id]; ok {
		delete(s.pool, id)
		s.Metrics.PoolReady.Set(float64(s.readyPoolLocked()))
	}
}

func (s *Supervisor) readyPoolLocked() int {
	n := 0
	for _, m := range s.pool {
		if m.ready {
			n++
		}
	}
	return n
}

// poolReady records a blank map's registration.
func (s *Supervisor) poolReady(ctx context.Context, r control.MapReady) error {
	s.mu.Lock()
	m, ok := s.pool[r.InstanceID]
	var cid string
	if ok {
		cid = m.containerID
	}
	s.mu.Unlock()
	if !ok {
		return apierr.Errorf(apierr.ENOTFOUND, "no warm pool container %q", r.InstanceID)
	}
	game, ctrl, err := PublishedPorts(ctx, s.API, cid)
	if err != nil {
		return fmt.Errorf("map-ready %q: %w", r.InstanceID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pool[r.InstanceID] != m {
		return apierr.Errorf(apierr.ENOTFOUND, "warm pool container %q was handed out or removed", r.InstanceID)
	}
	if !m.ready {
		s.Log.Info("warm pool container ready", "pool", m.id, "container", shortID(cid))
	}
	m.gamePort, m.ctrlPort, m.ready = game, ctrl, true
	s.Metrics.PoolReady.Set(float64(s.readyPoolLocked()))
	return nil
}

// takePoolLocked removes and returns a ready pool member, or nil, and asks for a
// refill. The caller holds s.mu.
func (s *Supervisor) takePoolLocked() *poolMember {
	ids := make([]string, 0, len(s.pool))
	for id, m := range s.pool {
		if m.ready {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	sort.Strings(ids)
	m := s.pool[ids[0]]
	delete(s.pool, ids[0])
	s.Metrics.PoolReady.Set(float64(s.readyPoolLocked()))
	s.kickPool()
	return m
}

// handout turns pool member m into instance in: the map is told its instance and
// MapConfig, the instance is ready at once, and the container is renamed to the
// instance's name in the background (a rename costs several milliseconds of the
// engine's time). Should the orchestrator die before the rename, adoption still finds
// the instance: it asks a pool-named container's /health which instance it runs.
func (s *Supervisor) handout(ctx context.Context, in *instance, m *poolMember) error {
	start := s.Now()
	s.mu.Lock()
	in.ContainerID, in.GamePort, in.ControlPort = m.containerID, m.gamePort, m.ctrlPort
	s.mu.Unlock()
	if err := s.RPC.StartInstance(ctx, controlURL(m.ctrlPort), mapcontrol.StartInstance{InstanceID: in.ID, MapID: in.MapID, Config: in.config}); err != nil {
		return fmt.Errorf("start-instance on pool container %s: %w", m.id, err)
	}
	s.mu.Lock()
	now := s.Now()
	in.Registered, in.lastBeat, in.lastActive, in.probeFails = true, now, now, 0
	s.Metrics.Handouts.Inc()
	s.transition(in, orchestrator.StateReady, fmt.Sprintf("handed warm pool container %s", m.id))
	s.mu.Unlock()
	s.Log.Info("warm pool handout", "instance", in.ID, "pool", m.id, "container", shortID(m.containerID), "tookMs", ms(now.Sub(start)))
	s.renameLater(in.ID, m.containerID)
	return nil
}

// renameLater renames a handed-out pool container to its instance's name in the
// background.
func (s *Supervisor) renameLater(instanceID, containerID string) {
	s.group.Go(func() error {
		ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
		defer cancel()
		if err := s.API.ContainerRename(ctx, containerID, orchestrator.ContainerName(instanceID)); err != nil {
			s.Log.Warn("rename handed-out pool container", "instance", instanceID, "container", shortID(containerID), "err", err)
		}
		return nil
	})
}

// poolExitedLocked handles the exit of a pool container: it leaves the pool, is
// removed, and the pool is refilled. It reports whether id was a pool member.
func (s *Supervisor) poolExitedLocked(id string, code int) bool {
	for pid, m := range s.pool {
		if m.containerID != id || !m.started {
			continue
		}
		delete(s.pool, pid)
		s.Metrics.PoolReady.Set(float64(s.readyPoolLocked()))
		s.Log.Warn("warm pool container exited", "pool", pid, "exitCode", code)
		s.group.Go(func() error {
			if err := RemoveMap(context.WithoutCancel(s.ctx), s.API, id); err != nil {
				s.Log.Warn("remove exited pool container", "pool", pid, "err", err)
			}
			return nil
		})
		s.kickPool()
		return true
	}
	return false
}
