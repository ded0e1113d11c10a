package record

import (
	"encoding/json"
	"time"
)

// EventTransferBoundary is the critical event kind that durably records where a
// character is handed over between maps, with its final state. The orchestrator writes
// it itself (request-transfer); maps never send it. Payload: CharacterState fields
// {"characterId","mapId","instanceId","x","y","attributes","revision"}.
//
// The item event kinds (item_pickup, item_drop, item_trade, item_consume,
// item_recover) and their payload are mapserver/kernel/items' Kind and Payload. Any other kind
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
