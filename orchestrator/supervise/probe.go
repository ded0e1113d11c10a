package supervise

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mapyard/mapyard/orchestrator"
)

// probeLoop runs check every ProbeInterval, and a resync every ResyncInterval, until
// ctx ends.
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
			// A round lasts as long as its slowest probe; restarting the ticker keeps a
			// full interval between rounds, so one network hiccup that outlasts the
			// interval is not counted as two failures back to back.
			t.Reset(s.ProbeInterval)
		}
	}
}

// check is one round of the time-based rules: HTTP probes of ready maps' /health,
// heartbeat timeouts, maps that never became ready, the end of quarantines, idle
// stops, and the move of quiet handed-out maps to containers of their own. Probes run
// concurrently; the round ends when the slowest one does.
func (s *Supervisor) check(ctx context.Context) {
	type probe struct {
		id, container, cred string
		port                int
	}
	var probes []probe
	var idle []string
	now := s.Now()

	s.mu.Lock()
	for _, in := range s.instances {
		if in.busy {
			continue
		}
		switch in.State {
		case orchestrator.StateReady:
			if in.Registered && now.Sub(in.lastBeat) > s.HeartbeatTimeout {
				s.unhealthy(in, fmt.Sprintf("no heartbeat for %s", now.Sub(in.lastBeat).Round(time.Millisecond)))
				continue
			}
			if in.ID != s.DefaultInstanceID && now.Sub(in.lastActive) > s.IdleStop {
				idle = append(idle, in.ID)
				continue
			}
			if in.pooled && s.Rehome > 0 && now.Sub(in.lastActive) > s.Rehome {
				in.cold = true
				s.spawn(in, orchestrator.StateRestarting, fmt.Sprintf("no players for %s: moving from its warm-pool container to one created for it", s.Rehome))
				continue
			}
			if in.ControlPort != 0 && now.Sub(in.Since) >= s.ProbeGrace {
				probes = append(probes, probe{in.ID, in.ContainerID, s.orchCredential(in.ident), in.ControlPort})
			}
		case orchestrator.StateStarting, orchestrator.StateRestarting:
			if now.Sub(in.Since) > s.StartTimeout {
				s.unhealthy(in, fmt.Sprintf("not ready %s after start", s.StartTimeout))
			}
		case orchestrator.StateQuarantined:
			if !now.Before(in.until) {
				in.restarts.reset()
				s.spawn(in, orchestrator.StateStarting, "quarantine over; trying again")
			}
		}
	}
	// A blank map that never registers would hold its pool place forever.
	var stuck []*poolMember
	for id, m := range s.pool {
		if m.started && !m.registered && now.Sub(m.startedAt) > s.StartTimeout {
			delete(s.pool, id)
			stuck = append(stuck, m)
		}
	}
	s.mu.Unlock()
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

	for _, id := range idle {
		s.group.Go(func() error {
			if err := s.stop(ctx, id, fmt.Sprintf("no players for %s", s.IdleStop)); err != nil {
				s.Log.Warn("idle stop failed", "instance", id, "err", err)
			}
			return nil
		})
	}

	// A probe may take longer than the interval on a loaded host: a slow answer is not
	// a failed one, so each probe gets at least a second.
	timeout := max(s.ProbeInterval, time.Second)
	var wg sync.WaitGroup
	for _, p := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, timeout)
			_, err := s.RPC.Health(pctx, controlURL(p.port), p.cred)
			cancel()
			if ctx.Err() != nil {
				return
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			in, ok := s.instances[p.id]
			if !ok || in.ContainerID != p.container || in.State != orchestrator.StateReady {
				return
			}
			if err == nil {
				in.probeFails = 0
				return
			}
			in.probeFails++
			s.Metrics.ProbeFailures.Inc()
			s.Log.Warn("map health probe failed", "instance", p.id, "failures", in.probeFails, "err", err)
			if in.probeFails >= s.ProbeFailures {
				s.unhealthy(in, fmt.Sprintf("%d health probes failed: %v", in.probeFails, err))
			}
		}()
	}
	wg.Wait()
}
