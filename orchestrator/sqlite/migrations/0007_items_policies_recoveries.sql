-- Item ownership as the item rules (mapserver/items) decide it: every item instance has
-- a template, a quantity, and is held by one character or lies at a world position of
-- one map instance. A used-up item keeps its row, 'destroyed', with its last place and
-- the map tick it went (since_tick), so the recovery pass knows when it may respawn and
-- a restarted map never re-creates it. The table is rebuilt because SQLite cannot change
-- the constraints of an existing one; old container owners become world locations.
CREATE TABLE inventory_items_v7 (
	item_id              TEXT PRIMARY KEY,
	template_id          TEXT NOT NULL,
	quantity             INTEGER NOT NULL CHECK (quantity >= 0),
	owner_character_id   TEXT REFERENCES characters (character_id),
	location_instance_id TEXT,
	location_x           INTEGER NOT NULL DEFAULT 0,
	location_y           INTEGER NOT NULL DEFAULT 0,
	state                TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'destroyed')),
	since_tick           INTEGER NOT NULL DEFAULT 0,
	updated_at_ms        INTEGER NOT NULL,
	CHECK (owner_character_id IS NULL OR location_instance_id IS NULL),
	CHECK (state = 'destroyed' OR (quantity > 0 AND (owner_character_id IS NOT NULL OR location_instance_id IS NOT NULL)))
);
INSERT INTO inventory_items_v7 (item_id, template_id, quantity, owner_character_id, location_instance_id, updated_at_ms)
	SELECT item_id, item_kind, quantity, owner_character_id, owner_container_id, updated_at_ms FROM inventory_items;
DROP TABLE inventory_items;
ALTER TABLE inventory_items_v7 RENAME TO inventory_items;
CREATE INDEX inventory_items_by_character ON inventory_items (owner_character_id) WHERE owner_character_id IS NOT NULL;
CREATE INDEX inventory_items_by_location ON inventory_items (location_instance_id) WHERE location_instance_id IS NOT NULL;
CREATE INDEX inventory_items_live_by_template ON inventory_items (template_id) WHERE state = 'active';

-- Critical-item policies (seed 001), owned by the orchestrator and edited through the
-- admin API. anchor_locations is the JSON array of world positions
-- [{"instanceId","x","y"},...] the item belongs at; it is read and written whole.
CREATE TABLE critical_item_policy (
	item_id                 TEXT PRIMARY KEY,
	template_id             TEXT NOT NULL,
	policy_type             TEXT NOT NULL CHECK (policy_type IN ('unique_persistent', 'regenerative_unique', 'instance_quota')),
	anchor_locations        TEXT NOT NULL,
	cooldown_ticks          INTEGER NOT NULL DEFAULT 0 CHECK (cooldown_ticks >= 0),
	ownership_timeout_ticks INTEGER NOT NULL DEFAULT 0 CHECK (ownership_timeout_ticks >= 0),
	quest_gate              TEXT,
	updated_at_ms           INTEGER NOT NULL
);

-- Append-only audit of the recovery pass: one row per item_recover critical event,
-- written in the same transaction, with where the item was (its holder, or its last
-- world position) and the anchor it went to.
CREATE TABLE item_recoveries (
	recovery_id      INTEGER PRIMARY KEY, -- rows are never deleted, so rowids only grow
	event_id         TEXT NOT NULL UNIQUE,
	instance_id      TEXT NOT NULL,
	tick             INTEGER NOT NULL,
	item_id          TEXT NOT NULL,
	trigger          TEXT NOT NULL CHECK (trigger IN ('missing', 'invalid_place', 'ownership_timeout', 'quota')),
	old_character_id TEXT,
	old_instance_id  TEXT,
	old_x            INTEGER NOT NULL DEFAULT 0,
	old_y            INTEGER NOT NULL DEFAULT 0,
	new_instance_id  TEXT NOT NULL,
	new_x            INTEGER NOT NULL,
	new_y            INTEGER NOT NULL,
	at_ms            INTEGER NOT NULL
);
CREATE INDEX item_recoveries_by_item ON item_recoveries (item_id, recovery_id);
CREATE TRIGGER item_recoveries_no_update BEFORE UPDATE ON item_recoveries
BEGIN
	SELECT RAISE(ABORT, 'item_recoveries is append-only');
END;
CREATE TRIGGER item_recoveries_no_delete BEFORE DELETE ON item_recoveries
BEGIN
	SELECT RAISE(ABORT, 'item_recoveries is append-only');
END;
