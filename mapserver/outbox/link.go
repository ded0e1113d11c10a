// Package outbox is the map server's link to its orchestrator, built as an
// asynchronous outbox: it registers the map (map-ready) and keeps it registered with
// heartbeats, pushes snapshot partitions, commits critical events, requests transfers
// and reports arrivals. Nothing the tick calls ever waits for the network: every
// method that sends something only queues it (bounded, never blocking) and the link's
// own goroutines send it, retrying with backoff, and deliver answers through callbacks.
package outbox

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// Orchestrator is the part of the control RPC client the link uses.
type Orchestrator interface {
	MapReady(ctx context.Context, r mapcontract.MapReady) error
	Heartbeat(ctx context.Context, h mapcontract.Heartbeat) (mapcontract.HeartbeatAnswer, error)
	PersistSnapshot(ctx context.Context, r mapcontract.PersistSnapshot) (mapcontract.PersistSnapshotAnswer, error)
	PersistCritical(ctx context.Context, ev record.CriticalEvent) (record.CriticalAck, error)
	RequestTransfer(ctx context.Context, r mapcontract.TransferRequest) (*mapcontract.TransferAnswer, error)
	TransferResult(ctx context.Context, r mapcontract.TransferResult) error
}

var _ Orchestrator = (*mapcontract.Client)(nil)

// Defaults of the link's exported knobs.
const (
	DefaultRetryMin      = 200 * time.Millisecond
	DefaultRetryMax      = 5 * time.Second
	DefaultQueueSize     = 1024
	DefaultPushEvery     = 10 * time.Second
	DefaultTransferLimit = 15 * time.Second
	// transferWorkers bounds how many transfer requests are in flight at once. Enough
	// that one destination that takes seconds to start does not hold up every other
	// portal, and that a live upgrade's handoff, a transfer for every character at one
	// tick, reaches the orchestrator together: its writer commits what arrives
	// together in one transaction, so the handoff of a thousand players takes a few
	// dozen commits instead of hundreds of round trips in a row.
	transferWorkers = 32
)

// ErrQueueFull is returned by a method that would have to wait for room in a queue:
// the caller (the tick) never waits, it refuses the action instead.
var ErrQueueFull = errors.New("orchestrator link queue is full")

// ErrClosed is delivered to callbacks of work the link could not finish before Close.
var ErrClosed = errors.New("orchestrator link closed")

// Link registers one map instance, keeps it registered, and carries everything else the
// map sends to the orchestrator. Set the exported fields before Open.
type Link struct {
	Orch      Orchestrator
	Heartbeat time.Duration
	Log       *slog.Logger

	// Players reports the current player count for heartbeats (from the game state, not
	// the transport); nil means zero. Tick reports the simulation tick; nil means zero.
	// Both are called from the link's goroutine and must be safe for that.
	Players func() int
	Tick    func() uint64

	// RetryMin and RetryMax bound the backoff between failed attempts of any call.
	RetryMin, RetryMax time.Duration
	// MaxBatch bounds the critical events sent in one request (POST
	// /orch/persist-critical-events): the events queued while the last request was in
	// flight go together. 0 means DefaultMaxBatch; 1 sends every event on its own.
	MaxBatch int
	// QueueSize bounds each queue: distinct pending snapshot partitions other than
	// characters' (see queuePush), critical events and reports, and transfer requests.
	QueueSize int
	// PushEvery is MAP_SNAPSHOT_PUSH_MS: how often PushDue says periodic pushes are due.
	PushEvery time.Duration
	// TransferLimit bounds how long one transfer request is retried before it fails
	// (the player then stays where it stands).
	TransferLimit time.Duration
	// SimCoreVersion is stamped on every snapshot envelope.
	SimCoreVersion string
	// Now is the clock of revisions, envelope times and PushDue.
	Now func() time.Time

	mu     sync.Mutex
	ready  mapcontract.MapReady
	rebind chan struct{}

	out      outbox
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	opened   bool
	closed   bool
	lastPush time.Time
	// away is set while the orchestrator did not answer the link's last call.
	away atomic.Bool
}

// Away reports whether the orchestrator failed to answer the link's last call
// (registration, heartbeat or critical event: no answer at all, or a 5xx) and has not
// answered one since. The map refuses actions that need a durable ack meanwhile, so
// that nothing is sent that could stay pending for as long as the orchestrator is gone;
// it learns within one heartbeat that the orchestrator is away or back.
func (l *Link) Away() bool { return l.away.Load() }

// answered records whether a call got an answer from the orchestrator: any error that
// is not a 4xx-class public error means it did not.
func (l *Link) answered(err error) {
	var e *apierr.Error
	l.away.Store(err != nil && (!errors.As(err, &e) || apierr.Status(e.Code) >= 500))
}

// New returns a Link that registers r through orch and sends a heartbeat every interval.
func New(orch Orchestrator, r mapcontract.MapReady, interval time.Duration, log *slog.Logger) *Link {
	return &Link{
		Orch: orch, ready: r, Heartbeat: interval, Log: log,
		RetryMin: DefaultRetryMin, RetryMax: DefaultRetryMax, QueueSize: DefaultQueueSize,
		PushEvery: DefaultPushEvery, TransferLimit: DefaultTransferLimit,
		SimCoreVersion: mapserver.Version, Now: time.Now,
		rebind: make(chan struct{}, 1),
	}
}

// Open starts the link's goroutines: registration and heartbeats, the snapshot pusher,
// the ordered sender of critical events and reports, and the transfer workers.
func (l *Link) Open() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.opened {
		return errors.New("orchestrator link already opened")
	}
	if l.Log == nil {
		l.Log = slog.New(slog.DiscardHandler)
	}
	if l.QueueSize <= 0 {
		l.QueueSize = DefaultQueueSize
	}
	l.opened = true
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.out.init(l.QueueSize)
	l.lastPush = l.Now()
	l.goRun(l.keepRegistered)
	l.goRun(l.pushLoop)
	l.goRun(l.callLoop)
	for range transferWorkers {
		l.goRun(l.transferLoop)
	}
	return nil
}

func (l *Link) goRun(fn func(ctx context.Context)) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		fn(l.ctx)
	}()
}

// Close stops the link at once: work still queued is abandoned and its callbacks get
// ErrClosed. Call Flush first for a clean stop.
func (l *Link) Close() error {
	l.mu.Lock()
	if !l.opened || l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
	l.out.abandon()
	return nil
}

// Flush waits until everything queued so far has been sent (or has failed for good):
// the clean-stop path pushes the last snapshots and then flushes before exiting.
func (l *Link) Flush(ctx context.Context) error {
	return l.out.waitIdle(ctx)
}

// Run is Open, then waits for ctx, then flushes (bounded by five seconds) and closes:
// the whole life of a link for a binary that has nothing else to do at stop.
func (l *Link) Run(ctx context.Context) {
	if err := l.Open(); err != nil {
		l.Log.Error("open orchestrator link", "err", err)
		return
	}
	<-ctx.Done()
	flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Flush(flush); err != nil {
		l.Log.Warn("orchestrator link not flushed at stop", "err", err)
	}
	_ = l.Close()
}

// Ready returns the registration the link currently sends.
func (l *Link) Ready() mapcontract.MapReady {
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

// keepRegistered registers the map, retrying with backoff until the orchestrator
// accepts, then sends heartbeats until ctx ends. An orchestrator that answers a
// heartbeat with "not registered" (it restarted) gets a fresh registration.
func (l *Link) keepRegistered(ctx context.Context) {
	for ctx.Err() == nil {
		if !l.register(ctx) {
			return
		}
		l.beat(ctx)
	}
}

// register retries MapReady until it succeeds; false means ctx ended first.
func (l *Link) register(ctx context.Context) bool {
	b := l.backoff()
	for {
		err := l.Orch.MapReady(ctx, l.Ready())
		l.answered(err)
		if err == nil {
			l.Log.Info("registered with orchestrator")
			return true
		}
		l.Log.Warn("map-ready failed; retrying", "err", err, "in", b.delay)
		if !b.wait(ctx) {
			return false
		}
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
		h := mapcontract.Heartbeat{InstanceID: l.Ready().InstanceID}
		if l.Players != nil {
			h.Players = l.Players()
		}
		if l.Tick != nil {
			h.Tick = l.Tick()
		}
		a, err := l.Orch.Heartbeat(ctx, h)
		l.answered(err)
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
