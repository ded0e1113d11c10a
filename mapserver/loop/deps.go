package loop

import (
	"context"
	"encoding/json"

	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/outbox"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// Game is the simulation with its area of interest and snapshot encoding, as the loop
// drives it. Decode is pure and safe for concurrent use (connections decode commands on
// their own goroutines, off the tick); every other method runs on the tick goroutine
// only, so a Game needs no locks.
type Game interface {
	// Decode turns a command's payload into what Apply takes. Errors carry a public
	// code (bad_request for a malformed payload, not_implemented for an unknown
	// feature or action).
	Decode(feature, action string, payload json.RawMessage) (any, error)
	// Spawn adds a character with the state it carries (nil: a new character, placed
	// at a spawn point).
	Spawn(characterID string, st *record.CharacterState) error
	// Apply hands a decoded command of a character to the next Step.
	Apply(characterID string, cmd any) error
	// Stop clears what a character was doing (its connection is gone).
	Stop(characterID string)
	// NewSession starts a fresh input sequence for a character a new connection took
	// over (a second tab, a reload): its inputs count from seq 1 again.
	NewSession(characterID string)
	// Hold freezes a character in place (on), as while its transfer is in flight, or
	// releases it (off).
	Hold(characterID string, on bool)
	// InputsDropped is the running count of movement inputs never walked (a client
	// sending faster than the tick, or a standing delay shed).
	InputsDropped() uint64
	// Step advances the simulation one tick and reports what the loop must act on.
	Step() []Event
	// State is a character's persistent state now (position, attributes).
	State(characterID string) (record.CharacterState, bool)
	// Despawn removes a character from the world.
	Despawn(characterID string)
	// NewView starts replication to one connection of a character: its area of
	// interest and the baselines of the snapshots sent to it.
	NewView(characterID string) View
	// Entities counts the entities in the world (players, NPCs and items).
	Entities() int
	// InstanceState is the payload of the instance's own snapshot partition (its
	// dynamic world beyond the characters), a JSON object.
	InstanceState() json.RawMessage
}

// Criticals is a Game with commands that change what the orchestrator must make
// durable first (items changing owner). The loop sends the event Begin returns through
// the link as a critical event and answers the command only when Settle has the
// orchestrator's answer; both run on the tick goroutine.
type Criticals interface {
	// Begin starts cmd of a character held at lease epoch if it is such a command (ok;
	// otherwise Apply takes it): the critical event to send, with eventID as its id, or
	// the refusal to answer at once. What it touches stays pending until Settle. The
	// event's Epochs name every character it involves; the loop fills in the epochs of
	// the others (a trade's other party) and, when one is not here, settles the event
	// with that refusal instead of sending it.
	Begin(characterID string, epoch int64, eventID string, cmd any) (ev *record.CriticalEvent, ok bool, err error)
	// Settle ends the command of event eventID with the orchestrator's answer (nil: the
	// durable ack). It returns the gameplay event for the players who see the result,
	// or the refusal to answer the command with.
	Settle(eventID string, answer error) (Event, error)
}

// Holdings is a Game whose characters carry items the orchestrator keeps for them. The
// loop loads them when a character arrives (join, transfer) and hands them over before
// the character can act; both methods run on the tick goroutine.
type Holdings interface {
	// Carry gives a character just spawned the items the orchestrator says it holds.
	Carry(characterID string, held []items.Item)
	// InventoryFrame is the "inventory" event of a character, sent to it right after
	// every welcome (later changes come as Step events).
	InventoryFrame(characterID string) []byte
}

// Writes is the transport's side of a snapshot round: the loop holds the writes of
// every connection while it encodes the round and releases them once, after it.
type Writes interface {
	HoldWrites()
	ReleaseWrites()
}

// SnapshotPaced is a Game told how many snapshots a second each view is sent, before
// the first: the loop builds them at every tick for some of the views, not at one
// tick for all, and what a snapshot shows may depend on the rate.
type SnapshotPaced interface {
	SetSnapshotHz(hz int)
}

// FarViewer is a Game whose snapshots show distant entities from afar; the loop puts its
// rule in every welcome.
type FarViewer interface {
	FarView() *wire.FarView
}

// ItemLoader reads what the orchestrator keeps for an arriving character
// (mapcontract.Client's CharacterItems, POST /orch/character-items). It is called on the
// connection's goroutine, after the redeem that gave this map the character's lease.
// Error codes: bad_request, forbidden, conflict (the lease moved on); any error that is
// not an *apierr.Error means the orchestrator could not be reached.
type ItemLoader interface {
	CharacterItems(ctx context.Context, r mapcontract.CharacterItemsRequest) (mapcontract.CharacterItemsAnswer, error)
}

var _ ItemLoader = (*mapcontract.Client)(nil)

// View is one connection's replication state.
type View interface {
	// Snapshot appends the binary snapshot frame of the current tick to dst: a full
	// snapshot while the client has acknowledged no baseline still held, else a delta
	// against the newest one it acknowledged.
	Snapshot(dst []byte) (frame []byte, full bool)
	// Ack records that the client received the snapshot of tick.
	Ack(tick uint64)
}

// Event is something a Step reports that the loop acts on outside the simulation:
// a character entering a portal, or a gameplay event for the players who see it.
type Event struct {
	// CharacterID entered Portal this tick (when Frame is nil).
	CharacterID string
	Portal      mapgen.Portal
	// Frame, when set, is a JSON `event` envelope to send to every character of
	// Viewers (those whose area of interest holds what happened).
	Frame   []byte
	Viewers []string
}

// Link is the map's asynchronous outbox to the orchestrator (outbox.Link). No method
// blocks the tick: each queues work and returns, refusing it (ErrQueueFull) rather than
// waiting for room.
type Link interface {
	// PushDue reports whether the periodic pushes (MAP_SNAPSHOT_PUSH_MS) are due now.
	PushDue() bool
	// PushCharacter queues the "character:<id>" partition of a character held at lease
	// epoch; newer pushes of a partition replace older ones still queued.
	PushCharacter(characterID string, epoch, mapTick int64, st record.CharacterStatePayload) (int64, error)
	// Push queues another partition's payload (the instance partition).
	Push(partition string, mapTick int64, payload json.RawMessage) (int64, error)
	// RequestTransfer asks for a transfer and calls done once, from the link's
	// goroutine, with the answer or the refusal (map_quarantined, map_unavailable).
	RequestTransfer(r mapcontract.TransferRequest, done func(outbox.TransferOutcome)) error
	// ReportTransfer reports, as the destination, whether a transferred player was
	// welcomed, which completes (or aborts) the transfer at the orchestrator.
	ReportTransfer(r mapcontract.TransferResult) error
	// Critical queues a critical event and calls done once, from the link's goroutine,
	// with the durable ack or the error that refused it for good.
	Critical(ev record.CriticalEvent, done func(record.CriticalAck, error)) error
}

var _ Link = (*outbox.Link)(nil)

// Reachability is a Link that knows whether the orchestrator answers now
// (outbox.Link). While it is away, the loop refuses commands that need a durable ack
// before sending anything (map_unavailable), so nothing changes hands.
type Reachability interface {
	Away() bool
}

var _ Reachability = (*outbox.Link)(nil)

// Redeemer redeems a player's join ticket or transfer token for this map through the
// orchestrator. It is called on the connection's goroutine, never on the tick. Error
// codes: ticket_invalid, ticket_expired, ticket_used, wrong_map, map_quarantined,
// map_unavailable; any error that is not an *apierr.Error means the orchestrator
// could not be reached.
type Redeemer interface {
	Redeem(ctx context.Context, r mapcontract.RedeemRequest) (*mapcontract.RedeemResult, error)
}

var _ Redeemer = (*mapcontract.Client)(nil)

// Equipment is a Game whose equipment commands are answered with a result event of
// their own, carrying the command's seq ("equip_result", success or a refusal code),
// instead of an ack or an error frame. Equip runs on the tick goroutine.
type Equipment interface {
	// Equip applies cmd, the seq-th command of a character, if it is an equipment
	// command (ok; otherwise the other paths take it), and returns the frame to send
	// the character, nil for a duplicate seq that was ignored. Changed says the
	// character's equipment changed: the loop then pushes its state at once, since
	// equipment travels only in that state and a crash before the next periodic push
	// would otherwise take it back.
	Equip(characterID string, seq uint64, cmd any) (result []byte, changed, ok bool)
}

// Named is a Game whose snapshots show each character as an entity: the loop tells
// players who ask (players/names, wire.NamesQuery) the name the orchestrator gave each
// character on redeem, by the entity id they see. EntityOf runs on the tick goroutine,
// right after Spawn.
type Named interface {
	// EntityOf returns the entity id the snapshots show a character under; it never
	// changes while the character stays.
	EntityOf(characterID string) (uint64, bool)
}

// Recoveries is a Game with a maintenance pass that sends critical events of its own:
// the recovery of critical items, decided at tick boundaries. After every Step the loop
// sends the events Recoveries returns through the link and hands each answer to
// Recovered; both run on the tick goroutine.
type Recoveries interface {
	// Recoveries returns the critical events decided since the last call.
	Recoveries() []record.CriticalEvent
	// Recovered ends the recovery of event eventID with the orchestrator's answer (nil:
	// the durable ack) and returns the gameplay event for the players who see the
	// result (none when Frame is nil).
	Recovered(eventID string, answer error) Event
}
