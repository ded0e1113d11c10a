package orchestrator

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// CriticalCommit is a critical event the domain has admitted, on its way to the store:
// the event to record (validated, its payload compacted so retries compare equal) and
// its effects. The store records the event and applies the effects in one durable
// transaction, or neither; a retried EventID gets the first commit's ack and its
// effects are not decided again.
type CriticalCommit struct {
	Event record.CriticalEvent
	// Items, for an item event, decides the event against the ownership state the store
	// reads inside that transaction (with mapserver/kernel/items' rules) and returns the new
	// state of the items it touches and, for a recovery, the audit row. Its errors
	// (refusals as *apierr.Error) fail the event alone.
	Items func(items.Ledger) (items.Outcome, error)
	// Boundary is the character state a transfer_boundary records (an older revision
	// never overwrites a newer one).
	Boundary *record.CharacterState
}

// BoundaryCommit is the commit of a transfer_boundary: critical event eventID of the
// map st.InstanceID that records st, a character's final state in the map it leaves,
// with st as its effect. The orchestrator writes boundaries itself, in the transaction
// that issues a transfer (TransferIssue); maps never send them. st must pass
// record.CharacterState.Validate, the one check of a handed-over state, so no boundary
// reaches the store that the rule refuses. Error code: EBADREQUEST.
func BoundaryCommit(eventID string, st record.CharacterState) (*CriticalCommit, error) {
	if err := st.Validate(); err != nil {
		return nil, err
	}
	payload, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("transfer boundary %q: %w", eventID, err)
	}
	ev := record.CriticalEvent{EventID: eventID, InstanceID: st.InstanceID, Kind: record.EventTransferBoundary, Payload: payload}
	return &CriticalCommit{Event: ev, Boundary: &st}, nil
}

// CriticalResult is the outcome of one event of a batch committed together
// (CriticalEventStore.CommitCriticalBatch): its durable ack, or the error that refused
// it (then it changed nothing).
type CriticalResult struct {
	Ack record.CriticalAck
	Err error
}

// ItemRecovery is one row of the append-only recovery audit: a recovery (tick, item,
// trigger, old place, anchor) and the critical event that made it.
type ItemRecovery struct {
	items.Recovery
	EventID    string    `json:"eventId"`
	InstanceID string    `json:"instanceId"`
	At         time.Time `json:"at"`
}

// ItemRecord is what the orchestrator knows of one item, as an operator asks for it
// (GET /admin/items): the item itself (template, quantity, state, place), who holds it,
// and the last critical event that changed it, so that "who has the crown, and since
// when" has an answer without reading the database.
type ItemRecord struct {
	items.Item
	// Holder is the saved character that holds the item now; "" for an item lying in a
	// world or used up (its place then says where it lies, or last lay).
	Holder string `json:"holder"`
	// UpdatedAt is when the orchestrator last wrote the item.
	UpdatedAt time.Time `json:"updatedAt"`
	// LastEvent is the last critical event that moved, recovered or used up the item;
	// nil for an item its map seeded and nothing changed since.
	LastEvent *ItemEvent `json:"lastEvent"`
}

// ItemEvent names a committed critical event that changed an item.
type ItemEvent struct {
	EventID     string    `json:"eventId"`
	Kind        string    `json:"kind"`
	InstanceID  string    `json:"instanceId"`
	MapTick     int64     `json:"mapTick"`
	CommittedAt time.Time `json:"committedAt"`
}
