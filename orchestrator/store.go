package orchestrator

import (
	"context"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// SnapshotStore keeps the latest snapshot partition of every map instance. Ingest is
// cheap and in memory; durability follows the checkpoint cadence, so after a crash
// non-critical state may roll back to the last checkpoint (seed 000).
type SnapshotStore interface {
	// PutSnapshot accepts revision of (instanceID, partition) if it is newer than the one
	// held, and reports whether it was accepted; an older or equal revision is ignored
	// without error, which makes retries and reordering harmless. It returns
	// apierr.EBADREQUEST, apierr.ETOOLARGE, apierr.EINVALIDENVELOPE, apierr.EHASHMISMATCH or apierr.ESCHEMAVERSION for bad
	// input and then changes nothing.
	PutSnapshot(ctx context.Context, instanceID, partition string, revision int64, env record.SnapshotEnvelope) (accepted bool, err error)

	// Snapshot returns the latest accepted snapshot of a partition, flushed or not.
	// It returns apierr.ENOTFOUND if none was ever accepted.
	Snapshot(ctx context.Context, instanceID, partition string) (*Snapshot, error)

	// Checkpoint durably writes every snapshot accepted since the last checkpoint in one
	// transaction. Stores also run it on their own cadence and on clean shutdown.
	Checkpoint(ctx context.Context) (CheckpointResult, error)
}

// CheckpointResult describes one completed checkpoint.
type CheckpointResult struct {
	// ID numbers checkpoints in order; 0 means nothing was pending and none was written.
	ID int64
	// Rows is how many partitions the checkpoint wrote.
	Rows int
	// At is when the checkpoint committed.
	At time.Time
}

// CriticalEventStore makes critical events durable before they are acknowledged.
type CriticalEventStore interface {
	// CommitCritical records c.Event and applies its effects (c.Items, c.Boundary) in
	// one transaction and returns only once it is durable. A retry with the same EventID
	// returns the first commit's ack (Duplicate set) without deciding again; the same id
	// with another event is apierr.ECONFLICT. apierr.ENOTFOUND names an item owner that
	// is not a saved character; c.Items' own errors are returned as they are. A failed
	// event changes nothing.
	CommitCritical(ctx context.Context, c CriticalCommit) (record.CriticalAck, error)

	// CommitCriticalBatch is CommitCritical for the events a map sent together (one
	// tick's): it applies them in order in one transaction, each on its own so that one
	// that fails is rolled back alone and answered with its error while the rest
	// commit, and returns once they are durable, a result for each of cs in its order.
	// One request and one commit instead of one per event is what keeps a tick's
	// events from waiting for each other's fsync. A failure of the whole (the store
	// closing, ctx ended before the store took the batch) is every result's error.
	CommitCriticalBatch(ctx context.Context, cs []CriticalCommit) []CriticalResult

	// CriticalEvent returns a committed event by id, or apierr.ENOTFOUND.
	CriticalEvent(ctx context.Context, eventID string) (*record.CriticalEvent, error)
}

// ItemStore keeps item ownership: every item instance with its template, quantity,
// holder or world position, and state (mapserver/kernel/items.Item).
type ItemStore interface {
	// SeedItems runs decide in one write transaction over the stored ownership state
	// and stores the items it returns, all or none. decide's errors are returned as
	// they are.
	SeedItems(ctx context.Context, decide func(items.Ledger) ([]items.Item, error)) error

	// InstanceItems returns, ordered by id, what a map instance's ownership state is made
	// of: the items lying (or last lying) in instanceID, the items held by characters
	// whose authority lease instanceID holds, and the items with the ids in also (the
	// policy copies anchored there), live and destroyed.
	InstanceItems(ctx context.Context, instanceID string, also []string) ([]items.Item, error)

	// CharacterItems returns the items characterID holds, live ones only, by id.
	CharacterItems(ctx context.Context, characterID string) ([]items.Item, error)

	// ItemRecoveries returns the recovery audit, oldest first: of itemID, or of every
	// item when itemID is empty; at most limit rows.
	ItemRecoveries(ctx context.Context, itemID string, limit int) ([]ItemRecovery, error)

	// ItemRecord returns one item, live or used up, with its holder and last critical
	// event; apierr.ENOTFOUND if no item has that id.
	ItemRecord(ctx context.Context, itemID string) (*ItemRecord, error)

	// HeldItemRecords returns the live items characterID holds, by id, as ItemRecord
	// does; apierr.ENOTFOUND if characterID is not a saved character.
	HeldItemRecords(ctx context.Context, characterID string) ([]ItemRecord, error)
}

// PolicyStore keeps the critical-item policies (critical_item_policy).
type PolicyStore interface {
	// ItemPolicies returns every policy, ordered by item id.
	ItemPolicies(ctx context.Context) ([]items.Policy, error)
	// ItemPolicy returns one policy, or apierr.ENOTFOUND.
	ItemPolicy(ctx context.Context, itemID string) (items.Policy, error)
	// PutItemPolicy creates or replaces the policy of p.ItemID and reports whether it was
	// created. It stores p as given: the domain validates it first.
	PutItemPolicy(ctx context.Context, p items.Policy) (created bool, err error)
	// DeleteItemPolicy removes a policy, or returns apierr.ENOTFOUND.
	DeleteItemPolicy(ctx context.Context, itemID string) error
}

// CharacterStore keeps persistent characters. Disposable session characters never reach
// it. An identity is the keyed hash of an authKey; it may own several characters and has
// one of them selected.
type CharacterStore interface {
	// CreateCharacter saves c for c.KeyHash, filling ID (if empty), CreatedAt and
	// Selected; an identity's first character becomes its selected one. It returns
	// apierr.ECHARACTERLIMIT if the identity already owns max characters (max <= 0: no
	// cap), apierr.EBADREQUEST without a KeyHash or Name or when another character of
	// the identity has the same name (compared by CharacterNameKey), and
	// apierr.ECONFLICT if the ID is taken.
	CreateCharacter(ctx context.Context, c *Character, max int) error

	// Characters returns the characters of an identity, oldest first, with Selected and
	// MapID filled; an empty list for an identity that owns none.
	Characters(ctx context.Context, keyHash string) ([]*Character, error)

	// SelectedCharacter returns the character an identity plays when it names none: the
	// one it selected, else its oldest. apierr.ENOTFOUND if it owns none.
	SelectedCharacter(ctx context.Context, keyHash string) (*Character, error)

	// OwnedCharacter returns characterID if keyHash owns it; apierr.ENOTFOUND otherwise,
	// the same answer whether the character does not exist or belongs to someone else.
	OwnedCharacter(ctx context.Context, keyHash, characterID string) (*Character, error)

	// SelectCharacter makes characterID the identity's selected character;
	// apierr.ENOTFOUND unless keyHash owns it.
	SelectCharacter(ctx context.Context, keyHash, characterID string) error

	// DeleteCharacter removes a character keyHash owns with its saved state, inventory and
	// lease; apierr.ENOTFOUND unless keyHash owns it. Callers check first that it is not
	// in play.
	DeleteCharacter(ctx context.Context, keyHash, characterID string) error

	// RekeyIdentity moves every character of oldHash (and its selection) to newHash,
	// after the root secret (and with it the hash key) was rotated, and reports how many
	// moved. It moves nothing if newHash already owns characters (a concurrent join
	// moved them first).
	RekeyIdentity(ctx context.Context, oldHash, newHash string) (int64, error)

	// CharacterState returns where a character was last saved: the newest of its
	// character partition snapshot and its durable state. It returns apierr.ENOTFOUND if the
	// character has never been saved in a map, and apierr.ESTATEINCOMPATIBLE for a saved
	// state it cannot use (a schema version it cannot migrate, or content that does not
	// match the saved hash).
	CharacterState(ctx context.Context, characterID string) (*record.CharacterState, error)

	// CharacterSaves returns the kept save audit rows of a character, newest first (an
	// empty list for a character never saved).
	CharacterSaves(ctx context.Context, characterID string) ([]CharacterSave, error)
}

// NonceStore remembers one-time token nonces so that a ticket or transfer token is
// redeemed at most once, across orchestrator restarts too.
type NonceStore interface {
	// UseNonce durably marks nonce used until expiresAt. It returns apierr.ETICKETUSED if the
	// nonce was already used and apierr.EBADREQUEST for an empty nonce.
	UseNonce(ctx context.Context, nonce string, expiresAt time.Time) error

	// PruneNonces forgets nonces whose tokens have expired and reports how many.
	PruneNonces(ctx context.Context) (int64, error)
}

// Store is everything the orchestrator persists. SQLite implements it today
// (orchestrator/sqlite); a server database can replace it without touching callers,
// which should depend on the narrowest of the interfaces above. Once a store is closing,
// PutSnapshot and every method that writes return apierr.EUNAVAILABLE; nothing is accepted that
// the final checkpoint would miss.
type Store interface {
	SnapshotStore
	CriticalEventStore
	CharacterStore
	NonceStore
	AdmissionStore
	ItemStore
	PolicyStore
}
