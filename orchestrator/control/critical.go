package control

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/mapyard/mapyard/orchestrator/apierr"
)

// Critical event kinds the store applies to its structured tables. Seed 000 leaves the
// final classification open, so a store records events of any other non-empty kind
// durably and audits them, but changes no table for them.
const (
	// EventItemGrant creates an item (or adds to its quantity) for an owner.
	// Payload: {"itemId","itemKind","quantity","to":ItemOwner}.
	EventItemGrant = "item_grant"
	// EventItemTransfer moves a whole item from one owner to another.
	// Payload: {"itemId","from":ItemOwner,"to":ItemOwner}.
	EventItemTransfer = "item_transfer"
	// EventItemDrop moves an item from a character to a map container (the ground, a
	// chest). Payload as EventItemTransfer.
	EventItemDrop = "item_drop"
	// EventItemSpend consumes quantity of an item; an item reaching zero is deleted.
	// Payload: {"itemId","from":ItemOwner,"quantity"}.
	EventItemSpend = "item_spend"
	// EventTrade moves several items at once, all or nothing.
	// Payload: {"moves":[{"itemId","from","to"},...]}.
	EventTrade = "trade"
	// EventTransferBoundary durably records where a character is handed over between
	// maps, with its final state. Payload: CharacterState fields
	// {"characterId","mapId","instanceId","x","y","attributes","revision"}.
	EventTransferBoundary = "transfer_boundary"
)

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
	// touches (as item owners). The orchestrator refuses an event for a character the map
	// no longer holds; they are checked, not stored.
	Epochs map[string]int64 `json:"epochs,omitempty"`
}

// Characters returns the characters an item event touches as owners, sorted and
// without repeats, so their leases can be checked before it is committed. Payloads are
// read loosely here; the store decodes them strictly.
func (ev CriticalEvent) Characters() ([]string, error) {
	var p struct {
		To, From ItemOwner
		Moves    []struct{ From, To ItemOwner }
	}
	if len(ev.Payload) > 0 {
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return nil, apierr.Errorf(apierr.EBADREQUEST, "critical event payload: %v", err)
		}
	}
	owners := []ItemOwner{p.To, p.From}
	for _, m := range p.Moves {
		owners = append(owners, m.From, m.To)
	}
	var ids []string
	for _, o := range owners {
		if o.CharacterID != "" && !slices.Contains(ids, o.CharacterID) {
			ids = append(ids, o.CharacterID)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// CriticalAck is a store's answer to a durable critical event. A retry of the same event
// gets the same Seq and CommittedAtMs as the first commit, with Duplicate set.
type CriticalAck struct {
	EventID       string `json:"eventId"`
	Seq           int64  `json:"seq"`
	CommittedAtMs int64  `json:"committedAtMs"`
	Duplicate     bool   `json:"duplicate"`
}

// ItemOwner says who holds an item: exactly one of a character or a map container (an
// id the map chooses, such as "<instanceId>/ground" or a chest's id).
type ItemOwner struct {
	CharacterID string `json:"characterId,omitempty"`
	ContainerID string `json:"containerId,omitempty"`
}

// Valid reports whether exactly one of the owner's fields is set.
func (o ItemOwner) Valid() bool { return (o.CharacterID == "") != (o.ContainerID == "") }

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
