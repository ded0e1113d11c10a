package mapcontract

import (
	"context"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// PathPersistCriticalBatch commits several critical events of one instance in one
// request (POST /orch/persist-critical-events): what a map sends once per tick with the
// events its players caused, so that one round trip and one group commit carry them all.
const PathPersistCriticalBatch = "/orch/persist-critical-events"

// MaxCriticalBatch bounds the events of one batch.
const MaxCriticalBatch = 256

// CriticalBatch is a batch of critical events, all of InstanceID. Its events are
// decided independently and in no particular order, each durable before the answer:
// a map never sends two events about the same item before the first one's ack (the
// item is pending until then).
type CriticalBatch struct {
	InstanceID string                 `json:"instanceId"`
	Events     []record.CriticalEvent `json:"events"`
}

// CriticalResult is one event's outcome in a batch: its ack, or the error it would
// have got alone.
type CriticalResult struct {
	Ack   *record.CriticalAck `json:"ack,omitempty"`
	Error *apierr.Error       `json:"error,omitempty"`
}

// CriticalBatchAnswer holds the results in the order of the batch's events.
type CriticalBatchAnswer struct {
	Results []CriticalResult `json:"results"`
}

// PersistCriticalBatch commits a batch and returns once every event is durable or
// refused. Retried: events are idempotent by EventID.
func (c *Client) PersistCriticalBatch(ctx context.Context, b CriticalBatch) (CriticalBatchAnswer, error) {
	return retried[CriticalBatchAnswer](ctx, c, PathPersistCriticalBatch, b)
}
