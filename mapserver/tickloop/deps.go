package tickloop

import (
	"context"
	"encoding/json"

	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/outbox"
)

// Writes is the transport's side of a snapshot round: the loop holds the writes of
// every connection while it encodes the round and releases them once, after it.
type Writes interface {
	HoldWrites()
	ReleaseWrites()
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
	// Away reports whether the orchestrator does not answer now. While it is away the
	// loop refuses commands that need a durable ack before sending anything
	// (map_unavailable), so nothing changes hands.
	Away() bool
}

var _ Link = (*outbox.Link)(nil)

// Redeemer redeems a player's join ticket or transfer token for this map through the
// orchestrator. It is called on the connection's goroutine, never on the tick. Error
// codes: ticket_invalid, ticket_expired, ticket_used, wrong_map, map_quarantined,
// map_unavailable; any error that is not an *apierr.Error means the orchestrator
// could not be reached.
type Redeemer interface {
	Redeem(ctx context.Context, r mapcontract.RedeemRequest) (*mapcontract.RedeemResult, error)
}

var _ Redeemer = (*mapcontract.Client)(nil)
