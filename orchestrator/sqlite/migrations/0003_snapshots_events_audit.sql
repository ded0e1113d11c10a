-- Append-only audit trail of checkpoints and critical events (seed 001). Triggers below
-- fill it, so no code path can commit one without the other.
CREATE TABLE audit_log (
	audit_id INTEGER PRIMARY KEY, -- rows are never deleted, so rowids only grow
	at_ms    INTEGER NOT NULL,
	kind     TEXT NOT NULL CHECK (kind IN ('checkpoint', 'critical_event')),
	ref      TEXT NOT NULL,
	detail   TEXT NOT NULL DEFAULT ''
);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
	SELECT RAISE(ABORT, 'audit_log is append-only');
END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
	SELECT RAISE(ABORT, 'audit_log is append-only');
END;

-- One row per completed checkpoint. last_event_seq is the newest critical event that
-- was durable when the checkpoint committed; recovery replays events after it.
CREATE TABLE checkpoints (
	checkpoint_id  INTEGER PRIMARY KEY AUTOINCREMENT,
	at_ms          INTEGER NOT NULL,
	row_count      INTEGER NOT NULL,
	last_event_seq INTEGER NOT NULL
);
CREATE TRIGGER checkpoints_audit AFTER INSERT ON checkpoints
BEGIN
	INSERT INTO audit_log (at_ms, kind, ref, detail)
	VALUES (NEW.at_ms, 'checkpoint', CAST(NEW.checkpoint_id AS TEXT), 'rows=' || NEW.row_count);
END;

-- Latest checkpointed snapshot of every (instance, partition), with the envelope
-- metadata needed to verify and migrate it later. Instances are not foreign keys: a map
-- may push before the supervisor records it, and partitions outlive stopped instances.
CREATE TABLE instance_partitions (
	instance_id      TEXT NOT NULL,
	partition        TEXT NOT NULL,
	revision         INTEGER NOT NULL,
	schema_version   INTEGER NOT NULL,
	sim_core_version TEXT NOT NULL,
	payload_hash     TEXT NOT NULL,
	map_tick         INTEGER NOT NULL,
	server_time_ms   INTEGER NOT NULL,
	payload          BLOB NOT NULL,
	checkpoint_id    INTEGER NOT NULL,
	PRIMARY KEY (instance_id, partition)
);

-- Critical events, durable before they are acknowledged and unique by event_id so a
-- retried event is answered from its first commit. Rows are never changed or removed.
CREATE TABLE critical_events (
	seq             INTEGER PRIMARY KEY, -- append-only: rowids only grow
	event_id        TEXT NOT NULL UNIQUE,
	instance_id     TEXT NOT NULL,
	kind            TEXT NOT NULL,
	map_tick        INTEGER NOT NULL,
	payload         BLOB NOT NULL,
	committed_at_ms INTEGER NOT NULL
);
CREATE INDEX critical_events_by_instance ON critical_events (instance_id, map_tick);
CREATE TRIGGER critical_events_no_update BEFORE UPDATE ON critical_events
BEGIN
	SELECT RAISE(ABORT, 'critical_events is append-only');
END;
CREATE TRIGGER critical_events_no_delete BEFORE DELETE ON critical_events
BEGIN
	SELECT RAISE(ABORT, 'critical_events is append-only');
END;
CREATE TRIGGER critical_events_audit AFTER INSERT ON critical_events
BEGIN
	INSERT INTO audit_log (at_ms, kind, ref, detail)
	VALUES (NEW.committed_at_ms, 'critical_event', NEW.event_id,
		NEW.kind || ' instance=' || NEW.instance_id || ' tick=' || NEW.map_tick);
END;
