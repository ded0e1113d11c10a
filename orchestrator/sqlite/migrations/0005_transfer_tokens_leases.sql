-- A transfer keeps its token's claims so a retried request re-mints the same token
-- instead of a second valid one; the subject is a keyed hash or a session id, never a key.
ALTER TABLE transfers ADD COLUMN subject TEXT NOT NULL DEFAULT '';
ALTER TABLE transfers ADD COLUMN nonce TEXT NOT NULL DEFAULT '';
ALTER TABLE transfers ADD COLUMN issued_at_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE transfers ADD COLUMN expires_at_ms INTEGER NOT NULL DEFAULT 0;
CREATE INDEX transfers_pending ON transfers (created_at_ms) WHERE state NOT IN ('completed', 'aborted');

-- Authority leases: where each saved character is authoritative. Every change bumps the
-- epoch; instance_id is '' while the character is in transit or in no map.
CREATE TABLE authority_leases (
	character_id  TEXT PRIMARY KEY,
	subject       TEXT NOT NULL,
	instance_id   TEXT NOT NULL,
	epoch         INTEGER NOT NULL,
	transfer_id   TEXT NOT NULL DEFAULT '',
	updated_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
