package orchestrator

// Session states, as GET /admin/sessions reports them.
const (
	// SessionActive: the character's map holds its lease and pushed its state recently.
	SessionActive = "active"
	// SessionIdle: the map holds the lease but pushed no state for a while; the player
	// has most likely left (maps do not report departures).
	SessionIdle = "idle"
	// SessionInTransit: the character is between two maps, authoritative in neither.
	SessionInTransit = "in_transit"
	// SessionGuest: a disposable character's lease; guests push no state, so their
	// activity is not measured.
	SessionGuest = "guest"
)

// Session is one character that holds an authority lease: what an operator sees in
// GET /admin/sessions. It never carries an authKey, only the first characters of its
// keyed hash, enough to tell identities apart.
type Session struct {
	CharacterID string `json:"characterId"`
	Name        string `json:"name,omitempty"`
	// Identity is the first IdentityPrefixLen characters of the keyed authKey hash,
	// or "guest" for a disposable character.
	Identity   string `json:"identity"`
	Disposable bool   `json:"disposable"`
	InstanceID string `json:"instanceId"`
	// TransferID is the transfer the character is in the middle of ("" when none).
	TransferID string `json:"transferId,omitempty"`
	Epoch      int64  `json:"epoch"`
	// SinceMs is when the lease last changed: the join or transfer that put the
	// character where it is.
	SinceMs int64 `json:"sinceMs"`
	// LastSeenMs is when its map last pushed its state (0: not since its lease).
	LastSeenMs int64 `json:"lastSeenMs,omitempty"`
	// State is SessionActive, SessionIdle, SessionInTransit or SessionGuest.
	State        string           `json:"state"`
	LastTransfer *TransferSummary `json:"lastTransfer,omitempty"`
}

// TransferSummary is a transfer as a session shows it.
type TransferSummary struct {
	TransferID     string        `json:"transferId"`
	State          TransferState `json:"state"`
	FromInstanceID string        `json:"fromInstanceId"`
	ToInstanceID   string        `json:"toInstanceId"`
	UpdatedAtMs    int64         `json:"updatedAtMs"`
}

// IdentityPrefixLen is how much of a keyed authKey hash an operator sees.
const IdentityPrefixLen = 8

// IdentityPrefix shortens a keyed authKey hash for display.
func IdentityPrefix(keyHash string) string {
	if len(keyHash) > IdentityPrefixLen {
		return keyHash[:IdentityPrefixLen]
	}
	return keyHash
}

// Summary returns t as a session shows it.
func (t *Transfer) Summary() *TransferSummary {
	return &TransferSummary{TransferID: t.ID, State: t.State, FromInstanceID: t.FromInstanceID, ToInstanceID: t.ToInstanceID,
		UpdatedAtMs: t.UpdatedAt.UnixMilli()}
}

// CleanupResult is what POST /admin/cleanup removed.
type CleanupResult struct {
	// Nonces of expired tokens forgotten.
	Nonces int64 `json:"nonces"`
	// Transfers completed or aborted, with expired tokens, removed.
	Transfers int64 `json:"transfers"`
	// GuestLeases of disposable characters not renewed within the guest lease TTL.
	GuestLeases int64 `json:"guestLeases"`
}
