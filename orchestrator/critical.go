package orchestrator

import (
	"time"

	"github.com/mapyard/mapyard/mapserver/items"
	"github.com/mapyard/mapyard/orchestrator/record"
)

// CriticalCommit is a critical event the domain has admitted, on its way to the store:
// the event to record (validated, its payload compacted so retries compare equal) and
// its effects. The store records the event and applies the effects in one durable
// transaction, or neither; a retried EventID gets the first commit's ack and its
// effects are not decided again.
type CriticalCommit struct {
	Event record.CriticalEvent
	// Items, for an item event, decides the event against the ownership state the store
	// reads inside that transaction (with mapserver/items' rules) and returns the new
	// state of the items it touches and, for a recovery, the audit row. Its errors
	// (refusals as *apierr.Error) fail the event alone.
	Items func(items.Ledger) (items.Outcome, error)
	// Boundary is the character state a transfer_boundary records (an older revision
	// never overwrites a newer one).
	Boundary *record.CharacterState
}

// ItemRecovery is one row of the append-only recovery audit: a recovery (tick, item,
// trigger, old place, anchor) and the critical event that made it.
type ItemRecovery struct {
	items.Recovery
	EventID    string    `json:"eventId"`
	InstanceID string    `json:"instanceId"`
	At         time.Time `json:"at"`
}
