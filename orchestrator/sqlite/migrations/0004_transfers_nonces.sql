-- Map transfers and their explicit state machine (DESIGN.md, Transfers). character_id is
-- not a foreign key: disposable session characters transfer too but are never saved.
CREATE TABLE transfers (
	transfer_id      TEXT PRIMARY KEY,
	character_id     TEXT NOT NULL,
	from_instance_id TEXT NOT NULL,
	to_instance_id   TEXT NOT NULL,
	state            TEXT NOT NULL CHECK (state IN ('requested', 'token_issued', 'destination_accepted', 'source_released', 'completed', 'aborted')),
	reason           TEXT NOT NULL DEFAULT '',
	created_at_ms    INTEGER NOT NULL,
	updated_at_ms    INTEGER NOT NULL
);
CREATE INDEX transfers_by_character ON transfers (character_id, created_at_ms);

-- Nonces of redeemed join tickets and transfer tokens, kept until they expire so a
-- token is redeemed once even across orchestrator restarts.
CREATE TABLE used_nonces (
	nonce         TEXT PRIMARY KEY,
	used_at_ms    INTEGER NOT NULL,
	expires_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX used_nonces_by_expiry ON used_nonces (expires_at_ms);
