package wire

import (
	"encoding/json"
	"slices"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
)

// Version is the envelope version ("v") this protocol speaks.
const Version = 1

// Message kinds of the public WebSocket envelope (DESIGN, "Public contract"). Client to
// server: hello (or resume), command, ack, ping. Server to client: welcome, ack,
// snapshot (binary frames, see docs/netcode.md), event, transfer, pong, error.
const (
	KindHello    = "hello"
	KindResume   = "resume"
	KindWelcome  = "welcome"
	KindPing     = "ping"
	KindPong     = "pong"
	KindCommand  = "command"
	KindAck      = "ack"
	KindSnapshot = "snapshot"
	KindEvent    = "event"
	KindTransfer = "transfer"
	KindError    = "error"
)

// Inbound is every field a client may send in one envelope. Decoding is lenient about
// unknown fields so that clients may grow the envelope before servers do.
type Inbound struct {
	V    int    `json:"v"`
	Kind string `json:"kind"`
	// Ticket is a hello's join ticket or transfer token.
	Ticket string `json:"ticket,omitempty"`
	// Resume is a hello's (or a resume message's) resume token from an earlier welcome.
	Resume string `json:"resume,omitempty"`
	// Formats lists the snapshot formats a hello's client decodes; absent means it
	// reads the welcome's SnapshotFormat. See DecodesSnapshots.
	Formats []int `json:"formats,omitempty"`
	// T is a ping's client timestamp, echoed in the pong.
	T json.Number `json:"t,omitempty"`
	// Seq numbers a command; a seq not above the last accepted one is ignored.
	Seq     uint64          `json:"seq,omitempty"`
	Feature string          `json:"feature,omitempty"`
	Action  string          `json:"action,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Tick acknowledges the newest snapshot the client received (an ack message, or
	// piggybacked on a command), which the next delta is encoded against.
	Tick uint64 `json:"tick,omitempty"`
}

// DecodesSnapshots reports whether a client that listed formats in its hello decodes
// the snapshot frames this package encodes: true when it listed none (nil, the member
// absent or null) or listed FormatVersion. A map refuses a hello for which it is false
// with CodeUnsupportedFormat, before sending a frame the client would misread.
func DecodesSnapshots(formats []int) bool {
	return formats == nil || slices.Contains(formats, FormatVersion)
}

// Welcome admits a player: who it is, where it is, what it needs to build the very same
// static world locally (the MapConfig, checked against WorldHash), and the resume token
// that brings it back to the same character after a dropped connection.
type Welcome struct {
	V           int    `json:"v"`
	Kind        string `json:"kind"`
	CharacterID string `json:"characterId"`
	// Name is the character's name, which players see it by (absent when the map
	// knows none); others' names come from a players/names query (names.go).
	Name       string           `json:"name,omitempty"`
	InstanceID string           `json:"instanceId"`
	MapID      string           `json:"mapId"`
	Epoch      int64            `json:"epoch"`
	WorldHash  string           `json:"worldHash"`
	TickHz     int              `json:"tickHz"`
	SnapshotHz int              `json:"snapshotHz"`
	MapConfig  mapgen.MapConfig `json:"mapConfig"`
	// SnapshotFormat is the layout of the binary snapshot frames that follow
	// (FormatVersion), so that a client of another format stops with a clear error.
	SnapshotFormat int `json:"snapshotFormat"`
	// ResumeToken reconnects to this character once, within ResumeTTLMs of losing the
	// connection ({"v":1,"kind":"hello","resume":"<token>"}).
	ResumeToken string `json:"resumeToken"`
	ResumeTTLMs int64  `json:"resumeTtlMs"`
	// Resumed is set when the welcome answers a resume rather than a ticket.
	Resumed bool `json:"resumed,omitempty"`
	// TransferID is set when the player arrived through a transfer token.
	TransferID string `json:"transferId,omitempty"`
	// FarView, when set, says which entities the snapshots show from afar, so that a
	// client interpolates them over their longer interval.
	FarView *FarView `json:"farView,omitempty"`
}

// FarView is the rule of a map's distant entities (docs/netcode.md): beyond Radius
// units of the player, an entity's position and facing change in its snapshots once
// every Every snapshots, at the moment they are sampled; the rest of its state on
// every snapshot.
type FarView struct {
	Radius float64 `json:"radius"`
	Every  int     `json:"every"`
	// Nearest, when set, also shows from afar what is nearer than Radius but not
	// among the Nearest entities nearest the player (by distance) in a crowded
	// snapshot; what chases or trades with the player is always near.
	Nearest int `json:"nearest,omitempty"`
}

// Ack acknowledges a command that snapshots do not acknowledge (every feature but
// movement, whose inputs are acknowledged by the snapshot header's input seq).
type Ack struct {
	V    int    `json:"v"`
	Kind string `json:"kind"`
	Seq  uint64 `json:"seq"`
}

// Event tells a player something happened that is not state in a snapshot, such as a
// transfer the orchestrator denied (Name "transfer_denied", Code its reason).
type Event struct {
	V       int    `json:"v"`
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// Data carries the event's own fields (a JSON object), named by Name.
	Data any `json:"data,omitempty"`
}

// NPCState is the Data of an "npc_state" event: NPC ID's perception state changed
// From → To (idle, suspicious, alert, chasing), about the player entity Target (0:
// none). The same state travels in snapshots (format 2); the event tells the moment.
type NPCState struct {
	ID     uint64 `json:"id"`
	From   string `json:"from"`
	To     string `json:"to"`
	Target uint64 `json:"target,omitempty"`
}

// NPCStateNames names the NPC perception states by their wire value.
var NPCStateNames = [...]string{"idle", "suspicious", "alert", "chasing"}

// Transfer sends the player to another map: it reconnects to WS (a public path) and
// says hello with Token as its ticket before ExpiresAtMs.
type Transfer struct {
	V            int    `json:"v"`
	Kind         string `json:"kind"`
	TransferID   string `json:"transferId"`
	Token        string `json:"token"`
	WS           string `json:"ws"`
	ToInstanceID string `json:"toInstanceId"`
	ExpiresAtMs  int64  `json:"expiresAtMs"`
}

// Pong answers a ping with the client's own timestamp, so the client measures RTT on
// its own clock.
type Pong struct {
	V    int         `json:"v"`
	Kind string      `json:"kind"`
	T    json.Number `json:"t"`
}

// ErrorEnvelope reports a refused message or handshake with one of the public error
// codes (ticket_used, ticket_expired, ticket_invalid, wrong_map, map_unavailable,
// bad_request, the command codes of codes.go, ...). Seq names the refused command, when
// it was one.
type ErrorEnvelope struct {
	V       int    `json:"v"`
	Kind    string `json:"kind"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Seq     uint64 `json:"seq,omitempty"`
}

// ErrorFrame encodes an error envelope. It cannot fail: every field is a string or a
// number.
func ErrorFrame(code, msg string, seq uint64) []byte {
	b, _ := json.Marshal(ErrorEnvelope{V: Version, Kind: KindError, Code: code, Message: msg, Seq: seq})
	return b
}

// AckFrame encodes the ack of command seq.
func AckFrame(seq uint64) []byte {
	b, _ := json.Marshal(Ack{V: Version, Kind: KindAck, Seq: seq})
	return b
}

// EventMoving is the event a map sends a player whose connection it hands over to the
// next container of its instance (a live upgrade): the socket stays open, inputs sent
// from now on until the next welcome are dropped, and a welcome from the new container
// follows on the same socket, then a full snapshot. A client keeps its world when the
// new welcome's worldHash is the one it has and builds it again when not, and shows
// no reconnect. Data is a Moving.
const EventMoving = "moving"

// Moving is the Data of a "moving" event.
type Moving struct {
	// Reason says why the player moves ("upgrade").
	Reason string `json:"reason"`
}
