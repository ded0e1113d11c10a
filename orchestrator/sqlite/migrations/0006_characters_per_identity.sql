-- mapyard:foreign-keys-off
-- An identity (the keyed hash of an authKey) may own several characters: key_hash is no
-- longer unique, and a name is unique per identity, compared case-insensitively through
-- name_key. SQLite cannot drop a constraint, so the table is rebuilt and every saved
-- character copied; foreign keys are off for this migration only (a DROP TABLE would
-- otherwise cascade to character_state) and checked before it commits.
CREATE TABLE characters_new (
	character_id  TEXT PRIMARY KEY,
	key_hash      TEXT NOT NULL,
	name          TEXT NOT NULL,
	name_key      TEXT NOT NULL,
	created_at_ms INTEGER NOT NULL,
	UNIQUE (key_hash, name_key)
);
INSERT INTO characters_new (character_id, key_hash, name, name_key, created_at_ms)
	SELECT character_id, key_hash, name, lower(name), created_at_ms FROM characters;
DROP TABLE characters;
ALTER TABLE characters_new RENAME TO characters;

-- The character each identity plays when it joins without naming one. An identity with
-- no row here plays its oldest character.
CREATE TABLE character_selection (
	key_hash     TEXT PRIMARY KEY,
	character_id TEXT NOT NULL REFERENCES characters (character_id) ON DELETE CASCADE
) WITHOUT ROWID;
INSERT INTO character_selection (key_hash, character_id) SELECT key_hash, character_id FROM characters;

-- Saved state says which schema and simulation build wrote it and carries a hash of its
-- content, so a load can migrate it or refuse it instead of trusting it blindly. Rows
-- saved before this migration have no hash ('') until they are next saved.
ALTER TABLE character_state ADD COLUMN schema_version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE character_state ADD COLUMN sim_core_version TEXT NOT NULL DEFAULT '';
ALTER TABLE character_state ADD COLUMN state_hash TEXT NOT NULL DEFAULT '';

-- Audit trail of character saves: one row each time a checkpoint or a transfer boundary
-- changes a character's saved state. Rows are never changed; only the oldest rows of a
-- character beyond the configured window are removed. Not a foreign key: the trail
-- outlives a deleted character.
CREATE TABLE character_saves (
	save_id          INTEGER PRIMARY KEY,
	character_id     TEXT NOT NULL,
	at_ms            INTEGER NOT NULL,
	source           TEXT NOT NULL CHECK (source IN ('checkpoint', 'transfer_boundary')),
	ref              TEXT NOT NULL,
	map_id           TEXT NOT NULL,
	instance_id      TEXT NOT NULL,
	revision         INTEGER NOT NULL,
	schema_version   INTEGER NOT NULL,
	sim_core_version TEXT NOT NULL,
	state_hash       TEXT NOT NULL
);
CREATE INDEX character_saves_by_character ON character_saves (character_id, save_id);
CREATE TRIGGER character_saves_no_update BEFORE UPDATE ON character_saves
BEGIN
	SELECT RAISE(ABORT, 'character_saves is append-only');
END;
