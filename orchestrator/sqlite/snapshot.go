package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
)

// snapKey names one snapshot partition of one map instance.
type snapKey struct{ instanceID, partition string }

// snapEntry is the latest accepted snapshot of a partition. dirty means it is newer than
// what the database holds and the next checkpoint must write it.
type snapEntry struct {
	snap  orchestrator.Snapshot
	char  *record.CharacterStatePayload // decoded payload of character partitions
	dirty bool
}

// snapshotCache is the in-memory view of every partition: what maps pushed last,
// whether or not it is checkpointed yet. It is guarded by its own mutex, not by the
// writer, so ingest never waits for a disk write.
type snapshotCache struct {
	mu      sync.Mutex
	entries map[snapKey]*snapEntry
	byChar  map[string]snapKey // character id -> its newest character partition
	closed  bool               // set by Close before its final checkpoint
}

// Recovery describes what Open rebuilt from the database after a restart or a crash.
type Recovery struct {
	// CheckpointID is the last completed checkpoint (0 if there was none).
	CheckpointID int64
	// CheckpointAt is when it committed.
	CheckpointAt time.Time
	// Partitions is how many snapshot partitions were loaded into the cache.
	Partitions int
	// EventsAfterCheckpoint counts the critical events committed after that checkpoint.
	// Their effects on inventory and character state were durable when they were
	// acknowledged, so they need no replay; character state reads prefer them over older
	// cached partitions by revision.
	EventsAfterCheckpoint int64
	// LastEventSeq is the newest durable critical event.
	LastEventSeq int64
}

// Recovery reports what the last Open rehydrated.
func (db *DB) Recovery() Recovery { return db.recovery }

// PutSnapshot accepts a snapshot partition into the in-memory cache if its revision is
// newer than the one held; the next checkpoint makes it durable. See
// orchestrator.SnapshotStore for the error codes.
func (db *DB) PutSnapshot(ctx context.Context, instanceID, partition string, revision int64, env record.SnapshotEnvelope) (accepted bool, err error) {
	defer func(size int) { db.Metrics.pushed(accepted, size, err) }(len(env.Payload))
	return db.putSnapshot(instanceID, partition, revision, env)
}

// putSnapshot is PutSnapshot without its metrics.
func (db *DB) putSnapshot(instanceID, partition string, revision int64, env record.SnapshotEnvelope) (bool, error) {
	switch {
	case !record.ValidKey(instanceID):
		return false, apierr.Errorf(apierr.EBADREQUEST, "snapshot: instanceId must be 1 to %d characters", record.MaxKeyLen)
	case !record.ValidPartition(partition):
		return false, apierr.Errorf(apierr.EBADREQUEST, "snapshot: partition must be 1 to %d characters, and a character partition must name its character", record.MaxKeyLen)
	case revision <= 0:
		return false, apierr.Errorf(apierr.EBADREQUEST, "snapshot: revision must be positive")
	}
	if err := env.ValidatePayload(db.MaxPayloadBytes); err != nil {
		return false, fmt.Errorf("snapshot %s/%s@%d: %w", instanceID, partition, revision, err)
	}
	env, err := record.MigrateSnapshot(env, db.SchemaVersion, db.SnapshotMigrations)
	if err != nil {
		return false, fmt.Errorf("snapshot %s/%s@%d: %w", instanceID, partition, revision, err)
	}
	var char *record.CharacterStatePayload
	if _, ok := record.CharacterOfPartition(partition); ok {
		if char, err = record.DecodeCharacterStatePayload(env.Payload); err != nil {
			return false, fmt.Errorf("snapshot %s/%s@%d: %w", instanceID, partition, revision, err)
		}
	}

	env.Payload = append(json.RawMessage(nil), env.Payload...) // the caller may reuse its buffer
	key := snapKey{instanceID, partition}
	c := &db.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, errClosed
	}
	if e := c.entries[key]; e != nil && e.snap.Revision >= revision {
		return false, nil // a retry or a reordered older push: already have as new or newer
	}
	c.put(key, &snapEntry{
		snap:  orchestrator.Snapshot{InstanceID: instanceID, Partition: partition, Revision: revision, Envelope: env},
		char:  char,
		dirty: true,
	})
	return true, nil
}

// put stores e under key and keeps the per-character index pointing at the newest
// character partition. The caller holds c.mu.
func (c *snapshotCache) put(key snapKey, e *snapEntry) {
	if c.entries == nil {
		c.entries = make(map[snapKey]*snapEntry)
		c.byChar = make(map[string]snapKey)
	}
	c.entries[key] = e
	if e.char == nil {
		return
	}
	charID, _ := record.CharacterOfPartition(key.partition)
	if old, ok := c.byChar[charID]; !ok || c.entries[old].snap.Revision <= e.snap.Revision {
		c.byChar[charID] = key
	}
}

// Snapshot returns the latest accepted snapshot of a partition, or ENOTFOUND.
func (db *DB) Snapshot(ctx context.Context, instanceID, partition string) (*orchestrator.Snapshot, error) {
	c := &db.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[snapKey{instanceID, partition}]
	if e == nil {
		return nil, apierr.Errorf(apierr.ENOTFOUND, "no snapshot of %s/%s", instanceID, partition)
	}
	s := e.snap
	return &s, nil // payloads are never mutated in place, so sharing the bytes is safe
}

// checkpointChunk is how many partitions one checkpoint transaction writes. A large
// checkpoint is split so that critical events, which share the single writer, wait for
// one chunk at most (a few milliseconds) instead of the whole flush.
const checkpointChunk = 1000

// Checkpoint writes every snapshot accepted since the last checkpoint, and the character
// state they carry, in batched transactions of checkpointChunk partitions; the last one
// records the checkpoint in the checkpoints table (and, by trigger, the audit log), so a
// recorded checkpoint is always complete. With nothing pending it writes nothing and
// returns ID 0.
func (db *DB) Checkpoint(ctx context.Context) (orchestrator.CheckpointResult, error) {
	db.ckptMu.Lock()
	defer db.ckptMu.Unlock()

	c := &db.cache
	c.mu.Lock()
	var pending []*snapEntry
	for _, e := range c.entries {
		if e.dirty {
			cp := *e
			pending = append(pending, &cp)
		}
	}
	c.mu.Unlock()
	if len(pending) == 0 {
		return orchestrator.CheckpointResult{}, nil
	}

	now, start := db.Now(), time.Now()
	res := orchestrator.CheckpointResult{Rows: len(pending), At: now}
	for start := 0; start < len(pending); start += checkpointChunk {
		chunk := pending[start:min(start+checkpointChunk, len(pending))]
		last := start+checkpointChunk >= len(pending)
		err := db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
			// Checkpoints run one at a time and are never deleted, so the next id is
			// known before the final chunk inserts it.
			var id int64
			if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(checkpoint_id), 0) + 1 FROM checkpoints`).Scan(&id); err != nil {
				return fmt.Errorf("next checkpoint id: %w", err)
			}
			if err := db.writePartitions(ctx, tx, chunk, id, now); err != nil {
				return err
			}
			if !last {
				return nil
			}
			if err := tx.QueryRowContext(ctx, `INSERT INTO checkpoints (checkpoint_id, at_ms, row_count, last_event_seq)
				VALUES (?, ?, ?, (SELECT COALESCE(MAX(seq), 0) FROM critical_events)) RETURNING checkpoint_id`,
				id, now.UnixMilli(), len(pending)).Scan(&res.ID); err != nil {
				return fmt.Errorf("insert checkpoint: %w", err)
			}
			return nil
		})
		if err != nil {
			return orchestrator.CheckpointResult{}, fmt.Errorf("checkpoint: %w", err)
		}
		c.mu.Lock()
		for _, e := range chunk {
			// Clear only what was written: a newer revision that arrived meanwhile stays dirty.
			if cur := c.entries[snapKey{e.snap.InstanceID, e.snap.Partition}]; cur != nil && cur.snap.Revision == e.snap.Revision &&
				cur.snap.Envelope.SchemaVersion == e.snap.Envelope.SchemaVersion {
				cur.dirty = false
			}
		}
		c.mu.Unlock()
	}
	db.stats.checkpoints.Add(1)
	db.Metrics.checkpointed(res.Rows, time.Since(start), now)
	return res, nil
}

// writePartitions upserts entries and projects character partitions into character_state.
func (db *DB) writePartitions(ctx context.Context, tx *sql.Tx, entries []*snapEntry, checkpointID int64, now time.Time) error {
	upsert := db.stmt(ctx, tx, upsertPartitionSQL)
	ref := fmt.Sprint(checkpointID)
	for _, e := range entries {
		s, env := &e.snap, &e.snap.Envelope
		if _, err := upsert.ExecContext(ctx, s.InstanceID, s.Partition, s.Revision, env.SchemaVersion, env.SimCoreVersion,
			env.PayloadHash, env.MapTick, env.ServerTimeMs, []byte(env.Payload), checkpointID); err != nil {
			return fmt.Errorf("write partition %s/%s: %w", s.InstanceID, s.Partition, err)
		}
		if e.char != nil {
			charID, _ := record.CharacterOfPartition(s.Partition)
			st := &savedState{
				CharacterState: record.CharacterState{CharacterID: charID, MapID: e.char.MapID, InstanceID: e.char.InstanceID,
					X: e.char.X, Y: e.char.Y, Attributes: e.char.Attributes, Revision: s.Revision},
				SchemaVersion: env.SchemaVersion, SimCoreVersion: env.SimCoreVersion,
			}
			if err := db.saveState(ctx, tx, st, saveCheckpoint, ref, now.UnixMilli()); err != nil {
				return err
			}
		}
	}
	return nil
}

// upsertPartitionSQL writes one partition unless the database already holds a newer
// revision of it; the same revision is rewritten only to store a schema upgrade.
const upsertPartitionSQL = `INSERT INTO instance_partitions (instance_id, partition, revision, schema_version,
	sim_core_version, payload_hash, map_tick, server_time_ms, payload, checkpoint_id)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (instance_id, partition) DO UPDATE SET revision = excluded.revision,
		schema_version = excluded.schema_version, sim_core_version = excluded.sim_core_version,
		payload_hash = excluded.payload_hash, map_tick = excluded.map_tick,
		server_time_ms = excluded.server_time_ms, payload = excluded.payload,
		checkpoint_id = excluded.checkpoint_id
	WHERE excluded.revision > instance_partitions.revision
		OR (excluded.revision = instance_partitions.revision AND excluded.schema_version > instance_partitions.schema_version)`

// rehydrate loads every checkpointed partition into the cache and records what the last
// checkpoint and the critical events after it were.
func (db *DB) rehydrate(ctx context.Context) error {
	rows, err := db.read.QueryContext(ctx, `SELECT instance_id, partition, revision, schema_version, sim_core_version,
		payload_hash, map_tick, server_time_ms, payload FROM instance_partitions`)
	if err != nil {
		return fmt.Errorf("load partitions: %w", err)
	}
	defer rows.Close()
	c := &db.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	var rec Recovery
	for rows.Next() {
		var s orchestrator.Snapshot
		var payload []byte
		env := &s.Envelope
		if err := rows.Scan(&s.InstanceID, &s.Partition, &s.Revision, &env.SchemaVersion, &env.SimCoreVersion,
			&env.PayloadHash, &env.MapTick, &env.ServerTimeMs, &payload); err != nil {
			return fmt.Errorf("scan partition: %w", err)
		}
		env.Payload = payload
		e := &snapEntry{snap: s}
		if env.SchemaVersion != db.SchemaVersion {
			// Upgrade explicitly and mark dirty so the next checkpoint stores the new
			// version; a version that cannot be upgraded stops Open instead of being
			// served under a schema it was not written for.
			up, err := record.MigrateSnapshot(*env, db.SchemaVersion, db.SnapshotMigrations)
			if err != nil {
				return fmt.Errorf("stored snapshot %s/%s: %w", s.InstanceID, s.Partition, err)
			}
			e.snap.Envelope, e.dirty = up, true
			payload = up.Payload
		}
		if _, ok := record.CharacterOfPartition(s.Partition); ok {
			// Checked on ingest; a row that no longer decodes is kept but not projected.
			e.char, _ = record.DecodeCharacterStatePayload(payload)
		}
		c.put(snapKey{s.InstanceID, s.Partition}, e)
		rec.Partitions++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load partitions: %w", err)
	}

	var lastSeq, atMs int64
	err = db.read.QueryRowContext(ctx, `SELECT checkpoint_id, at_ms, last_event_seq FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1`).
		Scan(&rec.CheckpointID, &atMs, &lastSeq)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read last checkpoint: %w", err)
	}
	if rec.CheckpointID != 0 {
		rec.CheckpointAt = fromMs(atMs)
	}
	if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM critical_events WHERE seq > ?`, lastSeq).
		Scan(&rec.EventsAfterCheckpoint, &rec.LastEventSeq); err != nil {
		return fmt.Errorf("count events after checkpoint: %w", err)
	}
	if rec.LastEventSeq == 0 {
		rec.LastEventSeq = lastSeq
	}
	db.recovery = rec
	return nil
}

// fromMs converts Unix milliseconds to a time.
func fromMs(ms int64) time.Time { return time.UnixMilli(ms) }
