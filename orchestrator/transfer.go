package orchestrator

import (
	"context"
	"time"
)

// TransferState is a step of the transfer state machine (seed 000). A transfer moves
// forward only: it is recorded at token_issued, in the one transaction that also makes
// the character's final state durable and ends the source's lease (the steps seed 000
// names requested and source_released happen inside it) → destination_accepted (the
// token was redeemed) → completed (the destination reported the player spawned), or to
// aborted from any state before completed. Requested and source_released are still
// read, from rows of versions that wrote each step apart.
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

// PendingTransferStates are the states a transfer can still be aborted from: every one
// but the final two.
func PendingTransferStates() []TransferState {
	return []TransferState{TransferRequested, TransferTokenIssued, TransferDestinationAccepted, TransferSourceReleased}
}

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
	// UpdatedAt is when the lease last changed (set by the store).
	UpdatedAt time.Time `json:"-"`
}

// TransferStore persists transfers and authority leases.
type TransferStore interface {
	// CreateTransfer saves a new transfer. apierr.ECONFLICT if its id exists.
	CreateTransfer(ctx context.Context, t *Transfer) error

	// IssueTransfer records everything a source map's transfer request writes, in one
	// transaction: the transfer at token_issued (its nonce is the token's), the
	// character's final state as a transfer_boundary critical event, and the lease that
	// takes the character off the source. apierr.ECONFLICT if the transfer id exists or
	// the lease moved past PrevEpoch; then nothing is written.
	IssueTransfer(ctx context.Context, t TransferIssue) error

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

	// HeldLeases returns every saved character's lease that names an instance or a
	// transfer in flight, with the character's name and its newest transfer: the saved
	// half of what an operator sees as sessions. Newest change first.
	HeldLeases(ctx context.Context) ([]Session, error)

	// LastTransfer returns a character's newest transfer, or apierr.ENOTFOUND.
	LastTransfer(ctx context.Context, characterID string) (*Transfer, error)

	// PruneFinishedTransfers removes completed and aborted transfers whose token expired
	// before now (a token past its expiry is refused before its transfer is looked at,
	// so removing them reopens nothing) and reports how many.
	PruneFinishedTransfers(ctx context.Context, now time.Time) (int64, error)
}

// TransferIssue is everything one transfer request writes, committed together so that a
// token never exists for a character whose final state or lease was not recorded, and a
// character never leaves its map without a token to arrive with.
type TransferIssue struct {
	// Transfer is the new transfer, in state TransferTokenIssued.
	Transfer *Transfer
	// Boundary is the character's final state in the source as a transfer_boundary
	// critical event; nil for a disposable character, whose state the orchestrator
	// keeps in memory.
	Boundary *CriticalCommit
	// Lease is the character's lease in transit (naming Transfer, no instance), replacing
	// the one at PrevEpoch.
	Lease     Lease
	PrevEpoch int64
}

// Admission is everything redeeming one ticket writes, committed together so that a
// ticket is never used up without its character admitted, nor admitted twice.
type Admission struct {
	// Nonce is the ticket's one-time nonce, marked used until ExpiresAt.
	Nonce     string
	ExpiresAt time.Time
	// Owner, when set, is the identity (keyed authKey hash) that must still own
	// Lease.CharacterID: a join ticket of a character deleted since it was issued
	// admits no one.
	Owner string
	// Lease is the character's new lease, written if its stored epoch is still
	// PrevEpoch. A zero CharacterID writes none: a disposable character's lease lives
	// in memory.
	Lease     Lease
	PrevEpoch int64
	// Supersede names a transfer in flight that a join ends: it is aborted if still
	// pending, and left as it is if it has moved on meanwhile.
	Supersede string
	// Accept names the transfer whose token is redeemed: token_issued →
	// destination_accepted.
	Accept string
}

// AdmissionStore records redeems.
type AdmissionStore interface {
	// Admit writes a in one transaction, all or nothing, and returns once it is
	// durable; superseded reports whether a.Supersede was aborted by it. Error codes:
	// apierr.ETICKETUSED (the nonce was used), apierr.ECONFLICT (the lease moved past
	// a.PrevEpoch, or a.Accept is not token_issued), apierr.ENOTFOUND (a.Owner does not
	// own the character, or a.Accept is not known), apierr.EBADREQUEST.
	Admit(ctx context.Context, a Admission) (superseded bool, err error)
}

// JoinRequest is the body of POST /api/v1/join.
type JoinRequest struct {
	AuthKey string `json:"authKey,omitempty"`
	// Name names the character created for an identity that owns none yet.
	Name string `json:"name,omitempty"`
	// CharacterID names which of the identity's characters to enter; empty enters the
	// selected one.
	CharacterID string `json:"characterId,omitempty"`
	// Rejoin is the rejoin credential of an earlier join's answer: it enters that
	// session's character again (a guest's too), wherever its lease is, from its last
	// pushed state. It is used once and replaces AuthKey, Name and CharacterID.
	Rejoin string `json:"rejoin,omitempty"`
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
	// Rejoin is the session's next rejoin credential (see JoinRequest.Rejoin): what a
	// client keeps in memory to come back after its map crashed.
	Rejoin string `json:"rejoin,omitempty"`
}
