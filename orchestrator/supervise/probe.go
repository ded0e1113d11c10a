package supervise

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/mapyard/mapyard/orchestrator"
)

// probeLoop runs check every ProbeInterval, and a resync every ResyncInterval, until
// ctx ends. A round does not wait for its probes: each map has at most one probe in
// flight and is probed again in the first round after it answered, so a map that
// answers slowly (or a node that swallows its packets) delays no other map's probe, no
// heartbeat timeout and no start timeout.
func (s *Supervisor) probeLoop(ctx context.Context) {
	t := time.NewTicker(s.ProbeInterval)
	defer t.Stop()
	r := time.NewTicker(ResyncInterval)
	defer r.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.C:
			if err := s.resync(ctx); err != nil && ctx.Err() == nil {
				s.Log.Warn("periodic resync failed", "err", err)
			}
		case <-t.C:
			s.check(ctx)
		}
	}
}

// check is one round of the time-based rules: each instance that is not in the middle
// of an action goes through timeRules in order, and the first rule that acts ends its
// round; then blank pool containers that never registered are replaced, idle maps are
// stopped and the ready maps due a probe have their /health asked. It returns at once;
// the returned group waits for the round's probes (tests use it, the loop does not).
func (s *Supervisor) check(ctx context.Context) *sync.WaitGroup {
	var r round
	now := s.Now()
	s.mu.Lock()
	for _, in := range s.instances {
		if in.busy {
			continue
		}
		for _, rule := range timeRules {
			if slices.Contains(rule.in, in.State) && rule.act(s, in, now, &r) {
				break
			}
		}
	}
	stuck := s.stuckPoolLocked(now)
	s.mu.Unlock()
	s.replaceStuck(ctx, stuck)
	s.stopIdle(ctx, r.idle)
	return s.startProbes(ctx, r.probes)
}

// A round is what a probe round collects under the lock and does after it.
type round struct {
	probes []probe
	idle   []string
}

// A probe is one ready map's /health to ask.
type probe struct {
	in              *instance // whose probing flag the probe clears when it ends
	container, cred string
	url             string // the map's control listener
}

// A timeRule is one rule of a probe round: the states it looks at, and what it does,
// reporting whether it acted (which ends the instance's round). The caller holds s.mu.
type timeRule struct {
	in  []orchestrator.InstanceState
	act func(s *Supervisor, in *instance, now time.Time, r *round) bool
}

// timeRules are the rules of a probe round, in the order they are tried.
var timeRules = []timeRule{
	{states(sReady), (*Supervisor).heartbeatTimeout},
	{states(sReady), (*Supervisor).idleStop},
	{states(sReady), (*Supervisor).rehome},
	{states(sReady), (*Supervisor).dueProbe},
	{states(sStarting, sRestarting), (*Supervisor).startTimeout},
	{states(sQuarantined), (*Supervisor).quarantineOver},
}

// heartbeatTimeout: a registered map that sent no heartbeat for HeartbeatTimeout is
// unhealthy.
func (s *Supervisor) heartbeatTimeout(in *instance, now time.Time, _ *round) bool {
	if !in.Registered || now.Sub(in.lastBeat) <= s.HeartbeatTimeout {
		return false
	}
	s.unhealthy(in, fmt.Sprintf("no heartbeat for %s", now.Sub(in.lastBeat).Round(time.Millisecond)))
	return true
}

// idleStop: a map other than the default one without players for IdleStop is stopped.
func (s *Supervisor) idleStop(in *instance, now time.Time, r *round) bool {
	if in.ID == s.DefaultInstanceID || now.Sub(in.lastActive) <= s.IdleStop {
		return false
	}
	r.idle = append(r.idle, in.ID)
	return true
}

// rehome: a map on a handed-out pool container without players for Rehome moves to a
// container created for it, whose name and labels say which instance it runs.
func (s *Supervisor) rehome(in *instance, now time.Time, _ *round) bool {
	if !in.pooled || s.Rehome <= 0 || now.Sub(in.lastActive) <= s.Rehome {
		return false
	}
	in.cold = true
	s.spawn(in, evRestart, fmt.Sprintf("no players for %s: moving from its warm-pool container to one created for it", s.Rehome))
	return true
}

// dueProbe: a ready map past ProbeGrace since it became ready, whose last probe has
// answered, has its /health probed.
func (s *Supervisor) dueProbe(in *instance, now time.Time, r *round) bool {
	if in.ControlPort == 0 || in.probing || now.Sub(in.Since) < s.ProbeGrace {
		return false
	}
	in.probing = true
	r.probes = append(r.probes, probe{in, in.ContainerID, s.orchCredential(in.ident), in.ports.ControlURL()})
	return true
}

// startTimeout: a map not ready StartTimeout after its start is unhealthy.
func (s *Supervisor) startTimeout(in *instance, now time.Time, _ *round) bool {
	if now.Sub(in.Since) <= s.StartTimeout {
		return false
	}
	s.unhealthy(in, fmt.Sprintf("not ready %s after start", s.StartTimeout))
	return true
}

// quarantineOver: a quarantine that ended starts the map again with a fresh window.
func (s *Supervisor) quarantineOver(in *instance, now time.Time, _ *round) bool {
	if now.Before(in.until) {
		return false
	}
	in.restarts.reset()
	s.spawn(in, evStart, "quarantine over; trying again")
	return true
}

// stuckPoolLocked takes out of the pool the blank containers that never registered
// within StartTimeout: they would hold their pool place forever. The caller holds s.mu.
func (s *Supervisor) stuckPoolLocked(now time.Time) []*poolMember {
	var stuck []*poolMember
	for id, m := range s.pool {
		if m.started && !m.registered && now.Sub(m.startedAt) > s.StartTimeout {
			delete(s.pool, id)
			stuck = append(stuck, m)
		}
	}
	return stuck
}

// replaceStuck removes stuck pool containers and has the pool fill their places.
func (s *Supervisor) replaceStuck(ctx context.Context, stuck []*poolMember) {
	for _, m := range stuck {
		s.Log.Warn("warm pool container never registered; replacing it", "pool", m.id, "container", shortID(m.containerID))
		s.group.Go(func() error {
			if err := s.Runtime.Remove(context.WithoutCancel(ctx), m.containerID); err != nil {
				s.Log.Warn("remove stuck pool container", "pool", m.id, "err", err)
			}
			return nil
		})
	}
	if len(stuck) > 0 {
		s.kickPool()
	}
}

// stopIdle stops the idle maps of a round in the background.
func (s *Supervisor) stopIdle(ctx context.Context, idle []string) {
	for _, id := range idle {
		s.group.Go(func() error {
			if err := s.stop(ctx, id, fmt.Sprintf("no players for %s", s.IdleStop)); err != nil {
				s.Log.Warn("idle stop failed", "instance", id, "err", err)
			}
			return nil
		})
	}
}

// startProbes asks each map of probes for its /health, each on a goroutine of its own,
// and returns what waits for them all: ProbeFailures failures in a row make a map
// unhealthy. A probe that cannot connect is repeated at once (see unreachable). A probe
// that outlasts the interval counts once, when it ends: its map is not asked again
// meanwhile, so one network hiccup is not counted as two failures back to back.
func (s *Supervisor) startProbes(ctx context.Context, probes []probe) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, p := range probes {
		wg.Add(1)
		s.group.Go(func() error {
			defer wg.Done()
			s.probe(ctx, p)
			return nil
		})
	}
	return &wg
}

// probe asks one map for its /health and counts the answer.
func (s *Supervisor) probe(ctx context.Context, p probe) {
	// A probe may take longer than the interval on a loaded host: a slow answer is not
	// a failed one, so each probe gets at least a second.
	timeout := max(s.ProbeInterval, time.Second)
	pctx, cancel := context.WithTimeout(ctx, timeout)
	_, err := s.RPC.Health(pctx, p.url, p.cred)
	cancel()
	if unreachable(err) && ctx.Err() == nil {
		// Not even a connection: a live map's kernel accepts one at once, busy or not,
		// so its process or its node is likely gone. Ask once more at once rather than
		// an interval later: a lost node's maps are restarted seconds sooner, while a
		// slow map still gets its interval.
		s.mu.Lock()
		in, ok := s.instances[p.in.ID]
		again := ok && in.ContainerID == p.container && in.probeFails+1 < s.ProbeFailures
		if again {
			in.probeFails++
			s.Metrics.ProbeFailures.Inc()
			s.Log.Warn("map health probe could not connect; asking again at once", "instance", p.in.ID, "failures", in.probeFails, "err", err)
		}
		s.mu.Unlock()
		if again {
			pctx, cancel := context.WithTimeout(ctx, timeout)
			_, err = s.RPC.Health(pctx, p.url, p.cred)
			cancel()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p.in.probing = false
	if ctx.Err() != nil {
		return
	}
	in, ok := s.instances[p.in.ID]
	if !ok || in.ContainerID != p.container || in.State != orchestrator.StateReady {
		return
	}
	if err == nil {
		in.probeFails = 0
		return
	}
	in.probeFails++
	s.Metrics.ProbeFailures.Inc()
	s.Log.Warn("map health probe failed", "instance", p.in.ID, "failures", in.probeFails, "err", err)
	if in.probeFails >= s.ProbeFailures {
		s.unhealthy(in, fmt.Sprintf("%d health probes failed: %v", in.probeFails, err))
	}
}

// unreachable reports whether err is a failure to connect at all (refused, no route,
// or no answer to the connection within the map client's dial timeout), as opposed to
// a map that accepted and then answered badly or slowly.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
