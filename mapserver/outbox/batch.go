package outbox

import (
	"context"
	"fmt"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// criticalBatcher is the batch route of the control RPC (mapcontract.Client's
// PersistCriticalBatch, POST /orch/persist-critical-events). An Orchestrator without it
// gets every event on its own.
type criticalBatcher interface {
	PersistCriticalBatch(ctx context.Context, b mapcontract.CriticalBatch) (mapcontract.CriticalBatchAnswer, error)
}

var _ criticalBatcher = (*mapcontract.Client)(nil)

// DefaultMaxBatch is the most critical events the link sends in one request: the
// orchestrator's batch limit.
const DefaultMaxBatch = mapcontract.MaxCriticalBatch

// maxBatch returns the batch size in effect: 1 (one event per request) when the
// orchestrator has no batch route or MaxBatch says so.
func (l *Link) maxBatch() int {
	if _, ok := l.Orch.(criticalBatcher); !ok || l.MaxBatch == 1 {
		return 1
	}
	if l.MaxBatch <= 0 || l.MaxBatch > mapcontract.MaxCriticalBatch {
		return DefaultMaxBatch
	}
	return l.MaxBatch
}

// gather returns first, a critical event, with the critical events queued right behind
// it, at most n in all and without waiting for more: what arrived while the last
// request was in flight goes out in one request and one group commit. It stops at a
// transfer report, which it returns as next so that calls keep their order.
func (l *Link) gather(first call, n int) (batch []call, next *call) {
	batch = append(batch, first)
	for len(batch) < n {
		select {
		case c := <-l.out.calls:
			if c.event == nil {
				return batch, &c
			}
			batch = append(batch, c)
		default:
			return batch, nil
		}
	}
	return batch, nil
}

// sendBatch commits the events of batch in one request, answering each event's
// callback with its own result, and retries with backoff the events whose failure is
// transient (the whole request, or an event's 5xx result). A batch the orchestrator
// refuses as a whole for good (an orchestrator without the route, or one that does not
// answer every event) is sent event by event instead.
func (l *Link) sendBatch(ctx context.Context, batch []call) {
	b := l.backoff()
	for len(batch) > 0 {
		req := mapcontract.CriticalBatch{InstanceID: l.Ready().InstanceID, Events: make([]record.CriticalEvent, len(batch))}
		for i, c := range batch {
			req.Events[i] = *c.event
			if req.Events[i].InstanceID == "" {
				req.Events[i].InstanceID = req.InstanceID
			}
		}
		a, err := l.Orch.(criticalBatcher).PersistCriticalBatch(ctx, req)
		if err == nil && len(a.Results) != len(batch) {
			err = apierr.Errorf(apierr.ENOTIMPLEMENTED, "batch of %d events answered with %d results", len(batch), len(a.Results))
		}
		if ctx.Err() == nil {
			l.answered(err)
		}
		switch {
		case ctx.Err() != nil:
			for _, c := range batch {
				l.callDone(c, record.CriticalAck{}, ErrClosed)
			}
			return
		case err != nil && !httpkit.Transient(err):
			l.Log.Warn("critical batch refused; sending its events one by one", "events", len(batch), "err", err)
			for _, c := range batch {
				l.sendCall(ctx, c)
			}
			return
		case err != nil:
			l.Log.Warn("critical batch failed; retrying", "events", len(batch), "err", err, "in", b.delay)
		default:
			var again []call
			for i, r := range a.Results {
				switch {
				case r.Error == nil && r.Ack != nil:
					l.callDone(batch[i], *r.Ack, nil)
				case r.Error != nil && httpkit.Transient(r.Error):
					again = append(again, batch[i])
				case r.Error != nil:
					l.callDone(batch[i], record.CriticalAck{}, r.Error)
				default:
					l.callDone(batch[i], record.CriticalAck{}, fmt.Errorf("batch result %d has neither ack nor error", i))
				}
			}
			if batch = again; len(batch) == 0 {
				return
			}
			l.Log.Warn("critical events failed in a batch; retrying", "events", len(batch), "in", b.delay)
		}
		if !b.wait(ctx) {
			for _, c := range batch {
				l.callDone(c, record.CriticalAck{}, ErrClosed)
			}
			return
		}
	}
}
