// Package orchlink is the map server's link to its orchestrator: it registers the map
// (map-ready) and keeps it registered with heartbeats. Later it also carries snapshot
// pushes, critical events and transfer requests.
package orchlink

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/mapyard/mapyard/orchestrator/control"
)

// Orchestrator is the part of the control RPC client the link uses.
type Orchestrator interface {
	MapReady(ctx context.Context, r control.MapReady) error
	Heartbeat(ctx context.Context, h control.Heartbeat) (control.HeartbeatAnswer, error)
}

var _ Orchestrator = (*control.Client)(nil)

// Link registers one map instance and keeps it registered.
type Link struct {
	Orch      Orchestrator
	Heartbeat time.Duration
	Log       *slog.Logger

	// Players reports the current player count for heartbeats; nil means zero.
	Players func() int

	// RetryMin and RetryMax bound the backoff between failed registrations.
	RetryMin, RetryMax time.Duration

	mu     sync.Mutex
	ready  control.MapReady
	rebind chan struct{}
}

// New returns a Link that registers r through orch and sends a heartbeat every interval.
func New(orch Orchestrator, r control.MapReady, interval time.Duration, log *slog.Logger) *Link {
	return &Link{Orch: orch, ready: r, Heartbeat: interval, Log: log, RetryMin: 200 * time.Millisecond, RetryMax: 5 * time.Second,
		rebind: make(chan struct{}, 1)}
}

// Ready returns the registration the link currently sends.
func (l *Link) Ready() control.MapReady {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ready
}

// Rebind switches the link to another instance (a warm-pool map that was handed one)
// and makes it register again under the new identity.
func (l *Link) Rebind(instanceID, mapID string) {
	l.mu.Lock()
	l.ready.InstanceID, l.ready.MapID = instanceID, mapID
	l.mu.Unlock()
	select {
	case l.rebind <- struct{}{}:
	default:
	}
}

// Run registers the map, retrying with backoff until the orchestrator accepts, then
// sends heartbeats until ctx ends. An orchestrator that answers a heartbeat with
// "not registered" (it restarted) gets a fresh registration.
func (l *Link) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if !l.register(ctx) {
			return
		}
		l.beat(ctx)
	}
}

// register retries MapReady until it succeeds; false means ctx ended first.
func (l *Link) register(ctx context.Context) bool {
	delay := l.RetryMin
	for {
		err := l.Orch.MapReady(ctx, l.Ready())
		if err == nil {
			l.Log.Info("registered with orchestrator")
			return true
		}
		l.Log.Warn("map-ready failed; retrying", "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
		delay = min(2*delay, l.RetryMax)
	}
}

// beat sends heartbeats until ctx ends or the orchestrator no longer knows the map.
func (l *Link) beat(ctx context.Context) {
	t := time.NewTicker(l.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.rebind:
			return
		case <-t.C:
		}
		h := control.Heartbeat{InstanceID: l.Ready().InstanceID}
		if l.Players != nil {
			h.Players = l.Players()
		}
		a, err := l.Orch.Heartbeat(ctx, h)
		if err != nil {
			l.Log.Warn("heartbeat failed", "err", err)
			continue
		}
		if !a.Registered {
			l.Log.Info("orchestrator does not know this map; registering again")
			return
		}
	}
}
