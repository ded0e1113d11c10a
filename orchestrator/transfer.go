package orchestrator

import (
	"context"
	"strings"
	"time"
)

// TransferState is a step of the transfer state machine (seed 000). A transfer moves
// forward only: requested → token_issued → destination_accepted → source_released →
// completed, or to aborted from any state before completed.
type TransferState string

// Transfer states.
const (
	TransferRequested           TransferState = "requested"
	TransferTokenIssued         TransferState = "token_issued"
	TransferDestinationAccepted TransferState = "destination_accepted"
	TransferSourceReleased      TransferState = "source_released"
	TransferCompleted           TransferState = "completed"
	TransferAborted             TransferState = "aborted"
)

// Done reports whether s is final.
func (s TransferState) Done() bool { return s == TransferCompleted || s == TransferAborted }

// Transfer is one character's move between two map instances. Its token claims
// (nonce, issue and expiry times) are kept so that a retried request re-mints the very
// same token instead of a second valid one.
type Transfer struct {
	ID             string        `json:"transferId"`
	CharacterID    string        `json:"characterId"`
	Subject        string        `json:"-"` // keyed authKey hash or disposable session id
	FromInstanceID string        `json:"fromInstanceId"`
	ToInstanceID   string        `json:"toInstanceId"`
	State          TransferState `json:"state"`
	Reason         string        `json:"reason,omitempty"`
	Nonce          string        `json:"-"`
	IssuedAt       time.Time     `json:"issuedAt"`
	ExpiresAt      time.Time     `json:"expiresAt"`
	CreatedAt      time.Time     `json:"createdAt"`
	UpdatedAt      time.Time     `json:"updatedAt"`
}

// Lease is the orchestrator's record of where a character is authoritative. At most one
// instance holds a character's lease; every change increments Epoch, and a map's claim
// to a character is only honoured with the current epoch. InstanceID is empty while the
// character is in transit (TransferID set) or in no map at all.
type Lease struct {
	CharacterID string `json:"characterId"`
	Subject     string `json:"-"`
	InstanceID  string `json:"instanceId"`
	Epoch       int64  `json:"epoch"`
	TransferID  string `json:"transferId,omitempty"`
}

// TransferStore persists transfers and authority leases.
type TransferStore interface {
	// CreateTransfer saves a new transfer. apierr.ECONFLICT if its id exists.
	CreateTransfer(ctx context.Context, t *Transfer) error

	// Transfer returns a transfer by id, or apierr.ENOTFOUND.
	Transfer(ctx context.Context, id string) (*Transfer, error)

	// AdvanceTransfer moves a transfer to state `to` if its current state is one of
	// `from`, recording reason, and returns it as updated. apierr.ECONFLICT (with the current
	// state in the message) otherwise, apierr.ENOTFOUND for an unknown id.
	AdvanceTransfer(ctx context.Context, id string, from []TransferState, to TransferState, reason string) (*Transfer, error)

	// PendingTransfers returns transfers not yet completed or aborted, oldest first.
	PendingTransfers(ctx context.Context) ([]*Transfer, error)

	// Lease returns a character's lease; a character never leased has a zero Lease.
	Lease(ctx context.Context, characterID string) (Lease, error)

	// SetLease replaces a character's lease if its stored epoch is still prevEpoch
	// (0 for none), and apierr.ECONFLICT otherwise, so two racing writers cannot both win.
	SetLease(ctx context.Context, l Lease, prevEpoch int64) error
}

// JoinRequest is the body of POST /api/v1/join.
type JoinRequest struct {
	AuthKey string `json:"authKey,omitempty"`
	Name    string `json:"name,omitempty"`
}

// JoinResponse is the answer of POST /api/v1/join: a ticket for one map instance and
// where to connect with it.
type JoinResponse struct {
	Ticket      string `json:"ticket"`
	CharacterID string `json:"characterId"`
	Disposable  bool   `json:"disposable"`
	MapID       string `json:"mapId"`
	InstanceID  string `json:"instanceId"`
	WS          string `json:"ws"`
	ExpiresAtMs int64  `json:"expiresAtMs"`
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
	Kind        string          `json:"kind"` // "join" or "transfer"
	CharacterID string          `json:"characterId"`
	Disposable  bool            `json:"disposable"`
	Epoch       int64           `json:"epoch"`
	TransferID  string          `json:"transferId,omitempty"`
	FromID      string          `json:"fromInstanceId,omitempty"`
	State       *CharacterState `json:"state,omitempty"`
}

// TransferRequest is what a source map sends to POST /orch/request-transfer when a
// player enters a portal. TransferID is chosen by the map so that a retry is the same
// request. State is the character's final state in the source map; it is durably saved
// before the answer, and the source must stop simulating the character once answered.
type TransferRequest struct {
	TransferID     string         `json:"transferId"`
	CharacterID    string         `json:"characterId"`
	FromInstanceID string         `json:"fromInstanceId"`
	ToInstanceID   string         `json:"toInstanceId,omitempty"`
	ToMapID        string         `json:"toMapId,omitempty"`
	Epoch          int64          `json:"epoch"`
	State          CharacterState `json:"state"`
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

// WSPath is the public WebSocket path of a map instance, proxied by the orchestrator.
func WSPath(instanceID string) string { return "/maps/" + instanceID + "/ws" }

// CharacterOfPartition returns the character id of a per-character snapshot partition
// ("character:<id>").
func CharacterOfPartition(partition string) (characterID string, ok bool) {
	id, ok := strings.CutPrefix(partition, CharacterPartitionPrefix)
	return id, ok && id != ""
}
