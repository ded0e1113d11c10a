package ws

import (
	"encoding/json"

	"github.com/mapyard/mapyard/mapserver/mapgen"
)

// Version is the envelope version ("v") this server speaks.
const Version = 1

// Message kinds of the public WebSocket envelope (see DESIGN, "Public contract").
const (
	KindHello   = "hello"
	KindWelcome = "welcome"
	KindPing    = "ping"
	KindPong    = "pong"
	KindCommand = "command"
	KindError   = "error"
)

// Inbound is every field a client may send in one envelope. Decoding is lenient about
// unknown fields so that clients may grow the envelope before servers do.
type Inbound struct {
	V       int             `json:"v"`
	Kind    string          `json:"kind"`
	Ticket  string          `json:"ticket,omitempty"`
	T       json.Number     `json:"t,omitempty"`
	Seq     uint64          `json:"seq,omitempty"`
	Feature string          `json:"feature,omitempty"`
	Action  string          `json:"action,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Welcome admits a player: who it is, where it is, and what it needs to build the very
// same static world locally (the MapConfig, checked against WorldHash).
type Welcome struct {
	V           int              `json:"v"`
	Kind        string           `json:"kind"`
	CharacterID string           `json:"characterId"`
	InstanceID  string           `json:"instanceId"`
	MapID       string           `json:"mapId"`
	Epoch       int64            `json:"epoch"`
	WorldHash   string           `json:"worldHash"`
	TickHz      int              `json:"tickHz"`
	SnapshotHz  int              `json:"snapshotHz"`
	MapConfig   mapgen.MapConfig `json:"mapConfig"`
	// TransferID is set when the player arrived through a transfer token.
	TransferID string `json:"transferId,omitempty"`
}

// Pong answers a ping with the client's own timestamp, so the client measures RTT on
// its own clock.
type Pong struct {
	V    int         `json:"v"`
	Kind string      `json:"kind"`
	T    json.Number `json:"t"`
}

// Error reports a refused message or handshake with one of the public error codes
// (ticket_used, ticket_expired, ticket_invalid, wrong_map, map_unavailable,
// bad_request, ...).
type Error struct {
	V       int    `json:"v"`
	Kind    string `json:"kind"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// errorFrame encodes an error envelope. It cannot fail: every field is a string.
func errorFrame(code, msg string) []byte {
	b, _ := json.Marshal(Error{V: Version, Kind: KindError, Code: code, Message: msg})
	return b
}
