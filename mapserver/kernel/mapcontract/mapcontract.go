// Package mapcontract is the map contract's orchestrator side: the /orch/* routes a map
// server calls on the orchestrator's control listener, their messages, and the typed
// Client maps use to call them — what docs/map-contract.md documents under "What the
// map calls". HTTP+JSON on host-local listeners only, every request carrying the
// map's credential in httpkit.SecretHeader, every error answered as an
// httpkit.ErrorResponse. The contract lives with the orchestrator, which serves it;
// what a map serves lives in mapserver/kernel/mapcontrol. It imports no orchestrator package
// but apierr, httpkit and record (the records the orchestrator keeps as maps send
// them), plus mapserver/kernel/items (the item rules both sides share), so a map server can
// depend on it without depending on the orchestrator.
//
// # Critical events and items
//
// Every item route demands a map credential and acts only for the caller's instance.
//
//   - POST /orch/persist-critical-event (CriticalEvent → CriticalAck): durable before
//     the answer, idempotent by eventId. Item kinds (item_pickup, item_drop, item_trade,
//     item_consume, item_recover) carry a mapserver/kernel/items Payload and, in epochs, the
//     lease epoch of every character they give an item to or take one from; the item
//     rules decide them, and a refusal is 409 with the rule's item_* code.
//   - POST /orch/persist-critical-events (CriticalBatch → CriticalBatchAnswer): up to
//     MaxCriticalBatch events of the instance in one request, each decided as if sent
//     alone (its own ack or error in Results, in order) and all sharing group commits;
//     what a map sends once per tick. Events of one batch are decided in no particular
//     order, so a map never batches two events about the same item.
//   - POST /orch/instance-items (InstanceItemsRequest → InstanceItemsAnswer): called by a
//     map at start, after map-ready. It seeds the ordinary items the map's generator put
//     on its ground (ids derived from the seed), keeping the stored state of any id
//     already known, and answers the instance's ownership state and the critical-item
//     policies anchored there, so a restarted map rebuilds ownership without
//     duplicating an item. Retried safely.
//   - POST /orch/character-items (CharacterItemsRequest → CharacterItemsAnswer): the
//     items of a character arriving in the map, for the lease holder only.
//   - POST /orch/item-policies (ItemPoliciesRequest → ItemPoliciesAnswer): the policies
//     anchored in the instance, reloaded to pick up an operator's edit.
//
// Operators edit the policies with the admin API (orchestrator/httpapi), not through
// this contract.
package mapcontract

import "github.com/mapyard/mapyard/mapserver/kernel/record"

// Orchestrator-side routes a map calls (served on the control listener).
const (
	PathMapReady        = "/orch/map-ready"
	PathMapHeartbeat    = "/orch/map-heartbeat"
	PathRedeem          = "/orch/redeem"
	PathRequestTransfer = "/orch/request-transfer"
	PathTransferResult  = "/orch/transfer-result"
	PathPersistSnapshot = "/orch/persist-snapshot"
	PathPersistCritical = "/orch/persist-critical-event"
)

// The records the orchestrator keeps exactly as a map sends them are declared in
// package record, which the orchestrator's domain shares; the contract names them here
// so that it reads whole. Each alias is the very same type. Their limits, the partition
// names and the envelope's constructor are record's alone (record.CharacterPartition,
// record.NewSnapshotEnvelope, record.MaxKeyLen, ...): callers import record for them.
type (
	// CharacterState is a character's saved state (record.CharacterState): what a
	// redeem spawns a character with and what a transfer hands over.
	CharacterState = record.CharacterState
	// CharacterStatePayload is the payload schema of a "character:<id>" snapshot
	// partition (record.CharacterStatePayload).
	CharacterStatePayload = record.CharacterStatePayload
	// SnapshotEnvelope wraps one pushed snapshot partition with its version metadata
	// (record.SnapshotEnvelope).
	SnapshotEnvelope = record.SnapshotEnvelope
	// CriticalEvent is the body of POST /orch/persist-critical-event
	// (record.CriticalEvent).
	CriticalEvent = record.CriticalEvent
	// CriticalAck is the answer to a durable critical event (record.CriticalAck).
	CriticalAck = record.CriticalAck
)
