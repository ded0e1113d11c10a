package outbox

import (
	"context"
	"fmt"

	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// Critical queues a critical event (item ownership or value change) and returns at
// once. done is called from the link's goroutine with the durable ack, or with the
// error that refused the event for good; the caller confirms the action to the player
// only then. Events are sent in the order they were queued and retried until they are
// committed (they are idempotent by EventID). The event's InstanceID defaults to the
// link's instance.
func (l *Link) Critical(ev record.CriticalEvent, done func(record.CriticalAck, error)) error {
	if ev.InstanceID == "" {
		ev.InstanceID = l.Ready().InstanceID
	}
	if done == nil {
		done = func(record.CriticalAck, error) {}
	}
	return enqueue(l, l.out.calls, call{event: &ev, done: done})
}

// CriticalChan is Critical with the answer delivered on a channel (buffered, so the
// link never waits for the reader) instead of a callback.
func (l *Link) CriticalChan(ev record.CriticalEvent) (<-chan CriticalResult, error) {
	ch := make(chan CriticalResult, 1)
	err := l.Critical(ev, func(a record.CriticalAck, err error) { ch <- CriticalResult{Ack: a, Err: err} })
	if err != nil {
		return nil, err
	}
	return ch, nil
}

// CriticalResult is the outcome of one critical event.
type CriticalResult struct {
	Ack record.CriticalAck
	Err error
}

// ReportTransfer queues the destination's report of an incoming transfer (spawned, or
// not admitted). It is retried until the orchestrator records it.
func (l *Link) ReportTransfer(r mapcontract.TransferResult) error {
	if r.InstanceID == "" {
		r.InstanceID = l.Ready().InstanceID
	}
	return enqueue(l, l.out.calls, call{report: &r})
}

// callLoop sends queued calls in order, one request at a time, each retried with
// backoff while its failure is transient. Critical events queued together go in one
// batch (batch.go).
func (l *Link) callLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-l.out.calls:
			for next := &c; next != nil; {
				next = l.sendNext(ctx, *next)
			}
		}
	}
}

// sendNext sends c, with the critical events queued behind it when it is one, and
// returns the call gather stopped at, if any.
func (l *Link) sendNext(ctx context.Context, c call) *call {
	n := l.maxBatch()
	if c.event == nil || n == 1 {
		l.sendCall(ctx, c)
		l.out.finished()
		return nil
	}
	batch, next := l.gather(c, n)
	if len(batch) == 1 {
		l.sendCall(ctx, c)
	} else {
		l.sendBatch(ctx, batch)
	}
	for range batch {
		l.out.finished()
	}
	return next
}

func (l *Link) sendCall(ctx context.Context, c call) {
	b := l.backoff()
	for {
		var ack record.CriticalAck
		var err error
		if c.event != nil {
			ack, err = l.Orch.PersistCritical(ctx, *c.event)
		} else {
			err = l.Orch.TransferResult(ctx, *c.report)
		}
		if ctx.Err() == nil {
			l.answered(err)
		}
		if err == nil || !httpkit.Transient(err) || ctx.Err() != nil {
			if ctx.Err() != nil && err != nil {
				err = ErrClosed
			}
			l.callDone(c, ack, err)
			return
		}
		l.Log.Warn("orchestrator call failed; retrying", "call", c.name(), "err", err, "in", b.delay)
		if !b.wait(ctx) {
			l.callDone(c, ack, ErrClosed)
			return
		}
	}
}

func (l *Link) callDone(c call, ack record.CriticalAck, err error) {
	if err != nil {
		l.Log.Warn("orchestrator call refused", "call", c.name(), "err", err)
	}
	if c.done != nil {
		if err != nil {
			err = fmt.Errorf("%s: %w", c.name(), err)
		}
		c.done(ack, err)
	}
}

// name says what a call is, for logs and errors.
func (c call) name() string {
	if c.event != nil {
		return "critical event " + c.event.EventID
	}
	return "transfer result " + c.report.TransferID
}
