-- Persistent characters, known only by the keyed hash of their authKey (never the key).
CREATE TABLE characters (
	character_id  TEXT PRIMARY KEY,
	key_hash      TEXT NOT NULL UNIQUE,
	name          TEXT NOT NULL,
	created_at_ms INTEGER NOT NULL
);

-- Where each character was last saved. Revision orders writers (checkpointed character
-- partitions and transfer_boundary critical events): an older revision never wins.
CREATE TABLE character_state (
	character_id    TEXT PRIMARY KEY REFERENCES characters (character_id) ON DELETE CASCADE,
	map_id          TEXT NOT NULL,
	instance_id     TEXT NOT NULL,
	x               REAL NOT NULL,
	y               REAL NOT NULL,
	attributes_json TEXT NOT NULL DEFAULT '{}',
	revision        INTEGER NOT NULL,
	updated_at_ms   INTEGER NOT NULL
);

-- Inventory: every item is held by exactly one character or one map container, which
-- is what makes ownership transfers atomic row updates instead of JSON surgery.
CREATE TABLE inventory_items (
	item_id            TEXT PRIMARY KEY,
	item_kind          TEXT NOT NULL,
	owner_character_id TEXT REFERENCES characters (character_id),
	owner_container_id TEXT,
	quantity           INTEGER NOT NULL CHECK (quantity > 0),
	updated_at_ms      INTEGER NOT NULL,
	CHECK ((owner_character_id IS NULL) <> (owner_container_id IS NULL))
);
CREATE INDEX inventory_items_by_character ON inventory_items (owner_character_id) WHERE owner_character_id IS NOT NULL;
CREATE INDEX inventory_items_by_container ON inventory_items (owner_container_id) WHERE owner_container_id IS NOT NULL;
