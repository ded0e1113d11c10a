package control

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mapyard/mapyard/orchestrator/apierr"
)

// EventTransferBoundary is the critical event kind that durably records where a
// character is handed over between maps, with its final state. The orchestrator writes
// it itself (request-transfer); maps never send it. Payload: CharacterState fields
// {"characterId","mapId","instanceId","x","y","attributes","revision"}.
//
// The item event kinds (item_pickup, item_drop, item_trade, item_consume,
// item_recover) and their payload are mapserver/items' Kind and Payload. Any other kind
// not beginning with "item_" is recorded durably and audited but changes no table.
const EventTransferBoundary = "transfer_boundary"

// CriticalEvent is a state change that must never be lost once acknowledged: item
// ownership or value transfer, spend/drop/trade, transfer boundaries
// (POST /orch/persist-critical-event). Map servers retry with the same EventID until
// they get an answer, so stores are idempotent by EventID.
type CriticalEvent struct {
	EventID    string          `json:"eventId"`
	InstanceID string          `json:"instanceId"`
	Kind       string          `json:"kind"`
	MapTick    int64           `json:"mapTick"`
	Payload    json.RawMessage `json:"payload"`
	// Epochs are the lease epochs the sending map holds for the characters the event
	// touches (as item holders). The orchestrator refuses an event for a character the
	// map no longer holds; they are checked, not stored.
	Epochs map[string]int64 `json:"epochs,omitempty"`
}

// CriticalAck is a store's answer to a durable critical event. A retry of the same event
// gets the same Seq and CommittedAtMs as the first commit, with Duplicate set.
type CriticalAck struct {
	EventID       string `json:"eventId"`
	Seq           int64  `json:"seq"`
	CommittedAtMs int64  `json:"committedAtMs"`
	Duplicate     bool   `json:"duplicate"`
}

// CharacterState is where a character was last saved and what it carried with it. Revision
// orders updates from snapshots and transfer boundaries so an older one never wins.
type CharacterState struct {
	CharacterID string          `json:"characterId"`
	MapID       string          `json:"mapId"`
	InstanceID  string          `json:"instanceId"`
	X           float64         `json:"x"`
	Y           float64         `json:"y"`
	Attributes  json.RawMessage `json:"attributes,omitempty"`
	Revision    int64           `json:"revision"`
	UpdatedAt   time.Time       `json:"updatedAt"`
}

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
	InstanceID string          `json:"instanceId"`
	Events     []CriticalEvent `json:"events"`
}

// CriticalResult is one event's outcome in a batch: its ack, or the error it would
// have got alone.
type CriticalResult struct {
	Ack   *CriticalAck  `json:"ack,omitempty"`
	Error *apierr.Error `json:"error,omitempty"`
}

// CriticalBatchAnswer holds the results in the order of the batch's events.
type CriticalBatchAnswer struct {
	Results []CriticalResult `json:"results"`
}

// PersistCriticalBatch commits a batch and returns once every event is durable or
// refused. Retried: events are idempotent by EventID.
func (c *Client) PersistCriticalBatch(ctx context.Context, b CriticalBatch) (CriticalBatchAnswer, error) {
	var a CriticalBatchAnswer
	err := c.retry(ctx, PathPersistCriticalBatch, b, &a)
	return a, err
}
