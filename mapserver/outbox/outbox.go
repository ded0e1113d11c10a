package outbox

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// outbox holds everything queued for the orchestrator and counts what is not finished
// yet, so Flush can wait for it.
type outbox struct {
	mu          sync.Mutex
	outstanding int
	idle        chan struct{} // closed (and replaced) whenever outstanding drops to zero
	lastRev     int64

	pending  map[string]*push // newest unsent push per partition
	pushKick chan struct{}
	size     int

	calls     chan call     // critical events and transfer reports, sent in order
	transfers chan transfer // transfer requests, sent by a few workers
}

// push is one snapshot partition waiting to be sent. Payload is built by the pusher,
// off the tick: either raw JSON or a value to marshal.
type push struct {
	instanceID, partition string
	revision, epoch       int64
	mapTick, timeMs       int64
	raw                   json.RawMessage
	value                 any
}

// call is one ordered, retried call: a critical event (with its callback) or a
// transfer report.
type call struct {
	event  *record.CriticalEvent
	done   func(record.CriticalAck, error)
	report *mapcontract.TransferResult
}

// transfer is one transfer request and the callback of its answer.
type transfer struct {
	req  mapcontract.TransferRequest
	done func(*mapcontract.TransferAnswer, error)
}

func (o *outbox) init(size int) {
	o.size = size
	o.idle = make(chan struct{})
	o.pending = make(map[string]*push)
	o.pushKick = make(chan struct{}, 1)
	o.calls = make(chan call, size)
	o.transfers = make(chan transfer, size)
}

// started counts one more unit of work; finished counts one done. The caller holds o.mu.
func (o *outbox) started() { o.outstanding++ }

func (o *outbox) finishedLocked() {
	o.outstanding--
	if o.outstanding == 0 {
		close(o.idle)
		o.idle = make(chan struct{})
	}
}

func (o *outbox) finished() {
	o.mu.Lock()
	o.finishedLocked()
	o.mu.Unlock()
}

// waitIdle returns once nothing is outstanding, or with ctx's error.
func (o *outbox) waitIdle(ctx context.Context) error {
	for {
		o.mu.Lock()
		if o.idle == nil || o.outstanding == 0 {
			o.mu.Unlock()
			return nil
		}
		idle := o.idle
		o.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// revision returns the next snapshot revision: the wall clock in microseconds, or one
// more than the last revision if the clock has not moved past it. Revisions must grow
// across maps, not only within one: a character pushed by map A and then by map B after
// a transfer is stored only if B's revision is higher, and map A's transfer boundary
// quotes a revision from A's clock too.
func (o *outbox) revision(now time.Time) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.nextRevLocked(now)
}

func (o *outbox) nextRevLocked(now time.Time) int64 {
	o.lastRev = max(o.lastRev+1, now.UnixMicro())
	return o.lastRev
}

// pendingOthersLocked counts the pending partitions that are not characters'. It walks
// the pending set, so it is called only when that set is at least QueueSize.
func (o *outbox) pendingOthersLocked() int {
	n := 0
	for k := range o.pending {
		if !isCharacter(k) {
			n++
		}
	}
	return n
}

// isCharacter reports whether partition is a character's.
func isCharacter(partition string) bool {
	_, ok := record.CharacterOfPartition(partition)
	return ok
}

// abandon fails everything still queued once the goroutines have stopped.
func (o *outbox) abandon() {
	o.mu.Lock()
	for k := range o.pending {
		delete(o.pending, k)
		o.finishedLocked()
	}
	o.mu.Unlock()
	for {
		select {
		case c := <-o.calls:
			if c.done != nil {
				c.done(record.CriticalAck{}, ErrClosed)
			}
			o.finished()
		case t := <-o.transfers:
			t.done(nil, ErrClosed)
			o.finished()
		default:
			return
		}
	}
}

// enqueue puts v on ch without blocking and counts it; ErrQueueFull if there is no
// room, ErrClosed once the link is closed.
func enqueue[T any](l *Link, ch chan T, v T) error {
	o := &l.out
	o.mu.Lock()
	defer o.mu.Unlock()
	if !l.isOpen() {
		return ErrClosed
	}
	select {
	case ch <- v:
		o.started()
		return nil
	default:
		return ErrQueueFull
	}
}

// backoff is the retry delay of one call: doubling from RetryMin up to RetryMax.
type backoff struct {
	delay, max time.Duration
}

func (l *Link) backoff() *backoff {
	lo, hi := l.RetryMin, l.RetryMax
	if lo <= 0 {
		lo = DefaultRetryMin
	}
	if hi < lo {
		hi = lo
	}
	return &backoff{delay: lo, max: hi}
}

// wait sleeps for the current delay and doubles it; false means ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	t := time.NewTimer(b.delay)
	defer t.Stop()
	b.delay = min(2*b.delay, b.max)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
