package mapcontract

import (
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// The messages of the /orch/* routes the orchestrator serves to maps.

// MapReady is what a map server reports when it has started and can take players.
type MapReady struct {
	InstanceID  string `json:"instanceId"`
	MapID       string `json:"mapId"`
	GamePort    int    `json:"gamePort"`    // port inside the container
	ControlPort int    `json:"controlPort"` // port inside the container
	Version     string `json:"version"`
}

// RedeemRequest is what a map sends to POST /orch/redeem when a player presents a join
// ticket or transfer token in its hello.
type RedeemRequest struct {
	InstanceID string `json:"instanceId"`
	Token      string `json:"token"`
}

// RedeemResult admits one character into the redeeming map, with the lease epoch the
// map must quote in everything it later reports for that character, and the state to
// spawn it with (nil for a character never saved).
type RedeemResult struct {
	Kind        string `json:"kind"` // "join" or "transfer"
	CharacterID string `json:"characterId"`
	// Name is the character's name as players see it: its owner's choice, or
	// "Guest" and a few characters of its id for a disposable one. A map shows it to
	// players instead of the id (the reference map: its welcome and players/names).
	Name       string                 `json:"name,omitempty"`
	Disposable bool                   `json:"disposable"`
	Epoch      int64                  `json:"epoch"`
	TransferID string                 `json:"transferId,omitempty"`
	FromID     string                 `json:"fromInstanceId,omitempty"`
	State      *record.CharacterState `json:"state,omitempty"`
	// Items are the live items the character holds, as /orch/character-items would
	// answer (none for a disposable character), so that a map admits a player with one
	// call. A map SHOULD take them from here; an orchestrator of a version before it
	// sends no items field (nil here), and a map then asks /orch/character-items.
	Items []items.Item `json:"items"`
}

// TransferRequest is what a source map sends to POST /orch/request-transfer when a
// player enters a portal. TransferID is chosen by the map so that a retry is the same
// request. State is the character's final state in the source map; it is durably saved
// before the answer, and the source must stop simulating the character once answered.
type TransferRequest struct {
	TransferID     string                `json:"transferId"`
	CharacterID    string                `json:"characterId"`
	FromInstanceID string                `json:"fromInstanceId"`
	ToInstanceID   string                `json:"toInstanceId,omitempty"`
	ToMapID        string                `json:"toMapId,omitempty"`
	Epoch          int64                 `json:"epoch"`
	State          record.CharacterState `json:"state"`
	// Handoff marks a live upgrade's transfer (see Handoff): the character goes to the
	// next container of its own instance, so ToInstanceID is FromInstanceID. The
	// orchestrator grants it only while it upgrades that instance.
	Handoff bool `json:"handoff,omitempty"`
}

// TransferAnswer carries the transfer token the source map forwards to its client, in
// the WebSocket `transfer` message.
type TransferAnswer struct {
	TransferID   string `json:"transferId"`
	Token        string `json:"token"`
	ToInstanceID string `json:"toInstanceId"`
	WS           string `json:"ws"`
	ExpiresAtMs  int64  `json:"expiresAtMs"`
}

// TransferResult is what the destination map reports to POST /orch/transfer-result
// once the player has spawned (Success) or could not be admitted.
type TransferResult struct {
	TransferID string `json:"transferId"`
	InstanceID string `json:"instanceId"`
	Success    bool   `json:"success"`
	Reason     string `json:"reason,omitempty"`
}

// PersistSnapshot is the body of POST /orch/persist-snapshot. Epoch is the lease epoch
// the map holds for the character of a "character:<id>" partition (ignored otherwise).
type PersistSnapshot struct {
	InstanceID string                  `json:"instanceId"`
	Partition  string                  `json:"partition"`
	Revision   int64                   `json:"revision"`
	Epoch      int64                   `json:"epoch,omitempty"`
	Envelope   record.SnapshotEnvelope `json:"envelope"`
}

// PersistSnapshotAnswer says whether the revision was newer than the one held; an older
// or equal one is ignored, which makes retries harmless.
type PersistSnapshotAnswer struct {
	Accepted bool `json:"accepted"`
}

// Heartbeat is what a map server sends every MAP_HEARTBEAT_MS.
type Heartbeat struct {
	InstanceID string `json:"instanceId"`
	Players    int    `json:"players"`
	Tick       uint64 `json:"tick"`
}

// HeartbeatAnswer tells a map whether the orchestrator knows it as registered; a map
// that is not registers again with MapReady.
type HeartbeatAnswer struct {
	Registered bool `json:"registered"`
}
