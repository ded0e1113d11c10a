// Package gameapi is the game API of mapyard's map server: what a game written in Go
// provides the tick loop (Game, View), and what the kit provides it (Setup, Out, and
// everything the loop does around the game: the clock, connections and their rate
// limits, resume tokens, snapshot pacing, the orchestrator link, transfers, pushes,
// names and metrics). docs/game-api.md walks through a whole game written against it.
//
// A game is one value that the loop's goroutine alone calls, so it needs no locks; only
// Decode runs on connections' goroutines. It does no I/O and reads no clock: time is the
// tick count, and everything that must reach a player or the orchestrator goes through
// the Out a call is given or the values it returns. There are no optional methods to
// discover: a game implements every method of Game, most in a line when it has nothing
// to say.
package gameapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"

	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// Game is a game as the tick loop drives it: its world, the characters in it, their
// commands, the tick, what each connection sees, what is kept of it, and the critical
// events it makes durable before anyone sees their outcome.
type Game interface {
	// Decode turns a command's payload into the value Command takes. It runs on the
	// connections' goroutines, concurrently and off the tick, so it must not touch the
	// game's state. Errors carry a public code (apierr): bad_payload for a malformed
	// payload, unknown_command for a feature or action the game does not have. The
	// kit's own feature, "players", never reaches it.
	Decode(feature, action string, payload json.RawMessage) (any, error)

	// Join puts an arriving character in the world (a join, a transfer through a
	// portal, a return after a crash) and returns the id snapshots show it under (0:
	// none), by which the kit names it to players who ask. An error refuses the
	// arrival: the player is told internal, and a transfer is reported failed, which
	// sends the player back to the map it came from.
	Join(a Arrival) (entity uint64, err error)
	// Leave takes a character out of the world for good here: it left through a
	// portal (its state went with the transfer) or its resume window passed (its
	// state was pushed first).
	Leave(characterID string)
	// Presence tells the game what the kit did to a character's connection or
	// transfer (see Presence); the character stays in the world in every case.
	Presence(characterID string, p Presence)

	// Command applies the seq-th command of a character, as Decode returned it, and
	// says how the kit answers it (see Reply). What else the command causes goes to
	// out, acted on after the answer.
	Command(characterID string, seq uint64, cmd any, out Out) Reply
	// Settle ends critical event eventID, which the game handed the kit (a Reply's
	// Critical or out.Critical), with the orchestrator's answer: nil is the durable
	// ack; an *apierr.Error is a refusal (the orchestrator's, written for operators,
	// or the kit's: conflict when a character it involves is leaving, map_unavailable
	// when the orchestrator cannot be reached). For an event of a command, the error
	// Settle returns answers the command (nil: an ack), so it is what the player
	// reads; what the outcome shows to others goes to out, sent after that answer.
	Settle(eventID string, answer error, out Out) error
	// Step advances the world one tick. Characters entering portals, frames for
	// players and critical events the game decides on its own go to out.
	Step(out Out)

	// Welcome is called at every welcome of a connection (a join, a resume, a
	// takeover): the connection's view, and what else the welcome carries.
	Welcome(characterID string) Welcome

	// State is a character's persistent state now: its position on this map in
	// metres and its attributes, a JSON object. The kit pushes it periodically, at
	// Out.Save, at a clean stop and when the character leaves; a transfer carries it
	// to the next map, whatever game runs there. A game keeps the attributes it does
	// not understand as they came (Arrival.State) and passes them on unchanged.
	State(characterID string) (record.CharacterState, bool)
	// InstanceState is the payload of the instance's own snapshot partition (its
	// dynamic world beyond the characters), a JSON object, pushed with the characters.
	InstanceState() json.RawMessage
	// Stats are the game's figures the kit publishes as metrics, read every tick.
	Stats() Stats
}

// New builds the game of one map instance. The kit calls it once, as soon as the
// orchestrator names the instance and the world is generated from its config, inside
// the orchestrator's start-instance request: an error refuses the config (400
// map_config_refused, with the error's message as the reason the host reads), the map
// stays free, and the orchestrator keeps the instance out of play (config_refused).
type New func(s Setup) (Game, error)

// Setup is what the kit hands a game it builds.
type Setup struct {
	// Config is the instance's MapConfig and World the static world generated from
	// it (terrain, colliders, spawn points, portals), the same on every start.
	Config mapgen.MapConfig
	World  *mapgen.World
	// TickHz is how many Steps run per second: the game's clock. SnapshotHz is how
	// many snapshots a second each view is asked for, spread over the ticks (each
	// view every TickHz/SnapshotHz ticks, not all views at one tick).
	TickHz, SnapshotHz int
	// Orchestrator answers the calls a game makes while it is built.
	Orchestrator Orchestrator
	// Context bounds those calls; Log is the map's logger.
	Context context.Context
	Log     *slog.Logger
}

// Orchestrator is what a game may ask the orchestrator while it is built
// (mapcontract.Client). Error codes: bad_request, forbidden; any error that is not an
// *apierr.Error means the orchestrator could not be reached.
type Orchestrator interface {
	// InstanceItems seeds the items the game generated for its instance and answers
	// the ownership state of the instance's items and its critical-item policies
	// (POST /orch/instance-items): what a restarted map rebuilds its items from.
	InstanceItems(ctx context.Context, r mapcontract.InstanceItemsRequest) (mapcontract.InstanceItemsAnswer, error)
}

var _ Orchestrator = (*mapcontract.Client)(nil)

// Arrival is a character the orchestrator admitted to this map: everything durable
// it has, which the orchestrator keeps whatever game it plays.
type Arrival struct {
	CharacterID string
	// Guest is a disposable character, which the orchestrator keeps no items for: an
	// item event involving it would be refused.
	Guest bool
	// State is the state it arrives with: saved (on this map or another) or carried
	// through a portal from the map it left; nil for a new character.
	State *record.CharacterState
	// Items are the live items the orchestrator says it holds. A game without items
	// ignores them; they stay with the orchestrator and arrive again on the next map.
	Items []items.Item
}

// Presence is what the kit did to a character's connection or transfer.
type Presence uint8

const (
	// Away: its connection is gone (dropped, replaced, or the client left). It
	// should stop what it was doing and wait, still in the world, for a resume.
	Away Presence = iota + 1
	// Fresh: a new connection took it over (a second tab, a reload). Its inputs
	// count from seq 1 again, and it is no longer held.
	Fresh
	// Held: it entered a portal and its transfer is in flight. It must not move or
	// act until Leave (granted) or Freed (refused).
	Held
	// Freed: its transfer was refused; it stays here and moves again.
	Freed
)

// Reply is how the kit answers a command. The zero Reply is an ack.
type Reply struct {
	// Err refuses the command: the player gets an error frame with the command's seq
	// and Err's public code and message (apierr), written for players.
	Err error
	// Critical is an event the orchestrator must make durable before the command's
	// outcome is shown (an item changing owner). The kit fills in the lease epoch of
	// every character its Epochs names, sends it, and answers the command with what
	// Settle returns once the orchestrator answered. EventID must be fresh
	// (NewEventID) and what the event moves must stay untouchable until Settle.
	Critical *record.CriticalEvent
	// Quiet sends no ack: the command needs none (movement inputs, whose seq the
	// snapshot header acknowledges) or the game answered it through out itself.
	Quiet bool
}

// Out takes what a call of the game causes besides its result. The kit acts on it
// when the call has returned: the notes, then the portals, the critical events and
// the saves, each in the order given. Every method is called on the tick goroutine,
// from within Command, Settle or Step.
type Out interface {
	// Notify sends frame, a JSON `event` envelope (wire.Event), to each of
	// characterIDs that is connected here.
	Notify(frame []byte, characterIDs []string)
	// Portal reports that a character entered a portal: the kit asks the orchestrator
	// for a transfer to p.TargetMapID, carrying the character's State; the character
	// is Held until the answer, then Leave (granted) or Freed (refused). A character
	// already in flight, or standing still in a portal that was refused, is ignored.
	Portal(characterID string, p mapgen.Portal)
	// Critical sends an event the game decided on its own (a maintenance pass), with
	// no command waiting for it; its answer comes through Settle. EventID must be
	// fresh and stable across retries.
	Critical(ev record.CriticalEvent)
	// Save pushes a character's State now rather than at the next periodic push: for
	// a change that lives only in the character's state, which a crash before the
	// next push would take back.
	Save(characterID string)
}

// Welcome is what a new connection of a character gets from the game.
type Welcome struct {
	// View is the connection's replication state; its first snapshot is full.
	View View
	// FarView is the rule of distant entities the welcome announces (nil: every
	// entity is shown the same).
	FarView *wire.FarView
	// After are frames (JSON `event` envelopes) sent right after the welcome: what the
	// player needs before its first command (the reference game's inventory).
	After [][]byte
}

// View is one connection's replication state: what its client has acknowledged.
type View interface {
	// Snapshot appends the binary snapshot frame of the current tick to dst (the
	// layout of docs/netcode.md, wire.Encoder) and says whether it is full: a full
	// snapshot while the client has acknowledged no baseline still held, else a delta
	// against the newest one it acknowledged. Appending nothing sends nothing.
	Snapshot(dst []byte) (frame []byte, full bool)
	// Ack records that the client received the snapshot of tick.
	Ack(tick uint64)
}

// Stats are a game's figures for the map's metrics.
type Stats struct {
	// Entities counts what the world holds (players, NPCs, items...).
	Entities int
	// InputsDropped is the running count of movement inputs never walked (sent
	// faster than the tick, or shed as a standing delay).
	InputsDropped uint64
}

// NewEventID returns a fresh critical event id: chosen once, so that every retry of
// the event is recognised as the same event.
func NewEventID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "ev-" + hex.EncodeToString(b[:])
}
