package supervise

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

	"github.com/mapyard/mapyard/orchestrator/keys"
)

// poolMember is one blank warm-pool container. It registers under its pool id
// (pool-<hex>); handing it an instance tells the runtime (Assign), which in Docker
// renames it to the instance's container name.
type poolMember struct {
	id          string // pool-<hex>
	containerID string
	started     bool // the runtime's Start returned
	startedAt   time.Time
	registered  bool // the blank map registered
	ports       Ports
	ident       keys.Identity // whose credentials the container holds
}

// ready reports whether m can be handed out: started and registered, in either order.
func (m *poolMember) ready() bool { return m.started && m.registered }

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
		if m.ready() {
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
	m := &poolMember{id: PoolIDPrefix + hex.EncodeToString(b[:])}
	ident, creds, err := s.mint(m.id)
	if err != nil {
		return err
	}
	m.ident = ident
	// A handed-out pool container keeps these credentials: the supervisor knows which
	// instance it runs (InstanceOf), so it acts for that instance only. Nothing in its
	// environment names an instance or a map: it is told both at handout.
	spec := Spec{InstanceID: m.id, Pool: true, Generation: ident.Generation, KeyID: s.Credentials.KeyID(),
		Env: append(append(append([]string(nil), s.Env...), creds...), mapcontrol.EnvPoolID+"="+m.id)}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// In the pool before it starts: the blank map may register before Start returns.
	s.mu.Lock()
	s.pool[m.id] = m
	s.mu.Unlock()
	c, err := s.Runtime.Start(cctx, spec)
	if err != nil {
		s.dropPoolMember(m.id)
		return err
	}
	s.mu.Lock()
	m.containerID, m.ports, m.started, m.startedAt = c.ID, c.Ports, true, s.Now()
	if m.ready() {
		s.Metrics.PoolReady.Set(float64(s.readyPoolLocked()))
	}
	s.mu.Unlock()
	s.Log.Info("warm pool container started", "pool", m.id, "container", shortID(c.ID))
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
		if m.ready() {
			n++
		}
	}
	return n
}

// poolReady records a blank map's registration.
func (s *Supervisor) poolReady(r orchestrator.MapRegistration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.pool[r.InstanceID]
	if !ok {
		return apierr.Errorf(apierr.ENOTFOUND, "no warm pool container %q (handed out or removed)", r.InstanceID)
	}
	if !m.registered {
		s.Log.Info("warm pool container registered", "pool", m.id, "container", shortID(m.containerID))
	}
	m.registered = true
	s.Metrics.PoolReady.Set(float64(s.readyPoolLocked()))
	return nil
}

// takePoolLocked removes and returns a ready pool member, or nil, and asks for a
// refill. The caller holds s.mu.
func (s *Supervisor) takePoolLocked() *poolMember {
	ids := make([]string, 0, len(s.pool))
	for id, m := range s.pool {
		if m.ready() {
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
// MapConfig, the instance is ready at once, and the runtime is told in the background
// (Assign). Should the orchestrator die before that, adoption still finds the
// instance: it asks a pool container's /health which instance it runs.
func (s *Supervisor) handout(ctx context.Context, in *instance, m *poolMember) error {
	start := s.Now()
	req, err := startRequest(in)
	if err != nil {
		return err
	}
	s.mu.Lock()
	in.ContainerID, in.ports, in.ident, in.pooled = m.containerID, m.ports, m.ident, true
	in.GamePort, in.ControlPort, in.GameAddr = m.ports.Game, m.ports.Control, m.ports.GameAddr
	s.mu.Unlock()
	if err := s.RPC.StartInstance(ctx, controlURL(m.ports.Control), s.orchCredential(m.ident), req); err != nil {
		return fmt.Errorf("start-instance on pool container %s: %w", m.id, err)
	}
	s.mu.Lock()
	now := s.Now()
	in.Registered, in.lastBeat, in.lastActive, in.probeFails = true, now, now, 0
	s.Metrics.Handouts.Inc()
	s.transition(in, orchestrator.StateReady, fmt.Sprintf("handed warm pool container %s", m.id))
	s.mu.Unlock()
	s.Log.Info("warm pool handout", "instance", in.ID, "pool", m.id, "container", shortID(m.containerID), "tookMs", ms(now.Sub(start)))
	s.assignLater(in.ID, m.containerID)
	return nil
}

// assignLater tells the runtime in the background that a handed-out pool container
// now runs instanceID (in Docker a rename, which costs milliseconds of engine time).
func (s *Supervisor) assignLater(instanceID, containerID string) {
	s.group.Go(func() error {
		ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
		defer cancel()
		if err := s.Runtime.Assign(ctx, containerID, instanceID); err != nil {
			s.Log.Warn("assign handed-out pool container", "instance", instanceID, "container", shortID(containerID), "err", err)
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
			if err := s.Runtime.Remove(context.WithoutCancel(s.ctx), id); err != nil {
				s.Log.Warn("remove exited pool container", "pool", pid, "err", err)
			}
			return nil
		})
		s.kickPool()
		return true
	}
	return false
}
