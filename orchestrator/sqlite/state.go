package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
)

// DefaultSaveAuditKeep is how many save audit rows are kept per character when
// DB.SaveAuditKeep is left at zero (ORCH_SAVE_AUDIT_KEEP's default).
const DefaultSaveAuditKeep = 100

// Sources of a character save, as the audit trail names them.
const (
	saveCheckpoint       = "checkpoint"
	saveTransferBoundary = "transfer_boundary"
)

// savedState is one character_state row as written: the state with the schema and
// simulation build that produced it.
type savedState struct {
	record.CharacterState
	SchemaVersion  int
	SimCoreVersion string
}

// hash returns the hash a saved row carries: SHA-256 over the canonical JSON of
// everything the row says about the character, so a row edited or damaged outside the
// orchestrator, or read under another schema, is recognised.
func (s *savedState) hash() string {
	b, _ := json.Marshal(struct { // cannot fail: attributes were checked as JSON on ingest
		SchemaVersion  int             `json:"schemaVersion"`
		SimCoreVersion string          `json:"simCoreVersion"`
		MapID          string          `json:"mapId"`
		InstanceID     string          `json:"instanceId"`
		X              float64         `json:"x"`
		Y              float64         `json:"y"`
		Attributes     json.RawMessage `json:"attributes"`
		Revision       int64           `json:"revision"`
	}{s.SchemaVersion, s.SimCoreVersion, s.MapID, s.InstanceID, s.X, s.Y, attributesOrEmpty(s.Attributes), s.Revision})
	return record.PayloadHash(b)
}

// attributesOrEmpty is the stored form of a character's attributes.
func attributesOrEmpty(a json.RawMessage) json.RawMessage {
	if len(a) == 0 {
		return json.RawMessage("{}")
	}
	return a
}

// CharacterState returns where a character was last saved: its durable state, unless the
// cache holds a newer character partition that is not checkpointed yet. A durable row
// is checked before it is used: a row whose content no longer matches its hash, or whose
// schema version is newer than the store's or has no migration to it, is refused with
// ESTATEINCOMPATIBLE; an older schema is migrated (SnapshotMigrations) on the way out.
func (db *DB) CharacterState(ctx context.Context, characterID string) (*record.CharacterState, error) {
	var row savedState
	s := &row.CharacterState
	s.CharacterID = characterID
	var attrs, hash string
	var ms int64
	err := db.queryRow(ctx, `SELECT map_id, instance_id, x, y, attributes_json, revision, updated_at_ms,
		schema_version, sim_core_version, state_hash FROM character_state WHERE character_id = ?`, characterID).
		Scan(&s.MapID, &s.InstanceID, &s.X, &s.Y, &attrs, &s.Revision, &ms, &row.SchemaVersion, &row.SimCoreVersion, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		s = nil
	} else if err != nil {
		return nil, fmt.Errorf("read character state %q: %w", characterID, err)
	} else {
		s.Attributes, s.UpdatedAt = json.RawMessage(attrs), fromMs(ms)
		if s, err = db.checkSaved(&row, hash); err != nil {
			return nil, err
		}
	}

	c := &db.cache
	c.mu.Lock()
	if key, ok := c.byChar[characterID]; ok {
		if e := c.entries[key]; e != nil && e.char != nil && (s == nil || e.snap.Revision > s.Revision) {
			s = &record.CharacterState{
				CharacterID: characterID, MapID: e.char.MapID, InstanceID: e.char.InstanceID,
				X: e.char.X, Y: e.char.Y, Attributes: e.char.Attributes, Revision: e.snap.Revision,
				UpdatedAt: fromMs(e.snap.Envelope.ServerTimeMs),
			}
		}
	}
	c.mu.Unlock()
	if s == nil {
		return nil, apierr.Errorf(apierr.ENOTFOUND, "character %q has no saved state", characterID)
	}
	return s, nil
}

// checkSaved verifies a durable row against its hash ("" for rows saved before rows had
// one) and brings it to the store's schema version.
func (db *DB) checkSaved(row *savedState, hash string) (*record.CharacterState, error) {
	id := row.CharacterID
	if hash != "" && hash != row.hash() {
		return nil, apierr.Errorf(apierr.ESTATEINCOMPATIBLE, "saved state of character %q does not match its hash", id)
	}
	if row.SchemaVersion == db.SchemaVersion {
		return &row.CharacterState, nil
	}
	payload, err := json.Marshal(record.CharacterStatePayload{MapID: row.MapID, InstanceID: row.InstanceID, X: row.X, Y: row.Y,
		Attributes: attributesOrEmpty(row.Attributes)})
	if err != nil {
		return nil, fmt.Errorf("encode saved state %q: %w", id, err)
	}
	env, err := record.MigrateSnapshot(record.SnapshotEnvelope{SchemaVersion: row.SchemaVersion, Payload: payload}, db.SchemaVersion, db.SnapshotMigrations)
	if err != nil {
		return nil, apierr.Errorf(apierr.ESTATEINCOMPATIBLE, "saved state of character %q (schema version %d, written by %q): %s",
			id, row.SchemaVersion, row.SimCoreVersion, apierr.Message(err))
	}
	p, err := record.DecodeCharacterStatePayload(env.Payload)
	if err != nil {
		return nil, apierr.Errorf(apierr.ESTATEINCOMPATIBLE, "saved state of character %q after migration: %s", id, apierr.Message(err))
	}
	s := row.CharacterState
	s.MapID, s.InstanceID, s.X, s.Y, s.Attributes = p.MapID, p.InstanceID, p.X, p.Y, p.Attributes
	return &s, nil
}

// upsertCharacterStateSQL writes a character's state unless a newer revision is stored,
// and only for characters that exist (disposable session characters are never saved).
const upsertCharacterStateSQL = `INSERT INTO character_state (character_id, map_id, instance_id, x, y,
	attributes_json, revision, updated_at_ms, schema_version, sim_core_version, state_hash)
	SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11 WHERE EXISTS (SELECT 1 FROM characters WHERE character_id = ?1)
	ON CONFLICT (character_id) DO UPDATE SET map_id = excluded.map_id, instance_id = excluded.instance_id,
		x = excluded.x, y = excluded.y, attributes_json = excluded.attributes_json,
		revision = excluded.revision, updated_at_ms = excluded.updated_at_ms,
		schema_version = excluded.schema_version, sim_core_version = excluded.sim_core_version,
		state_hash = excluded.state_hash
	WHERE excluded.revision > character_state.revision`

// insertSaveSQL appends one row to the save audit trail.
const insertSaveSQL = `INSERT INTO character_saves (character_id, at_ms, source, ref, map_id, instance_id, revision,
	schema_version, sim_core_version, state_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// pruneSavesSQL keeps the newest ?2 audit rows of a character.
const pruneSavesSQL = `DELETE FROM character_saves WHERE character_id = ?1 AND save_id <=
	(SELECT save_id FROM character_saves WHERE character_id = ?1 ORDER BY save_id DESC LIMIT 1 OFFSET ?2)`

// saveState writes s unless a newer revision is stored and, when it did, appends the
// save to the audit trail (source and ref say what saved it) and trims the character's
// trail to SaveAuditKeep rows.
func (db *DB) saveState(ctx context.Context, tx *sql.Tx, s *savedState, source, ref string, nowMs int64) error {
	hash := s.hash()
	res, err := db.stmt(ctx, tx, upsertCharacterStateSQL).ExecContext(ctx, s.CharacterID, s.MapID, s.InstanceID, s.X, s.Y,
		string(attributesOrEmpty(s.Attributes)), s.Revision, nowMs, s.SchemaVersion, s.SimCoreVersion, hash)
	if err != nil {
		return fmt.Errorf("write character state %q: %w", s.CharacterID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return err // an older revision, or a character that is not saved
	}
	if _, err := db.stmt(ctx, tx, insertSaveSQL).ExecContext(ctx, s.CharacterID, nowMs, source, ref, s.MapID, s.InstanceID,
		s.Revision, s.SchemaVersion, s.SimCoreVersion, hash); err != nil {
		return fmt.Errorf("audit save of %q: %w", s.CharacterID, err)
	}
	if _, err := db.stmt(ctx, tx, pruneSavesSQL).ExecContext(ctx, s.CharacterID, db.SaveAuditKeep); err != nil {
		return fmt.Errorf("trim save audit of %q: %w", s.CharacterID, err)
	}
	return nil
}

// putCharacterState applies a transfer_boundary event: the character must exist, and an
// older revision than the stored one leaves the state alone (the event is still recorded).
func (db *DB) putCharacterState(ctx context.Context, tx *sql.Tx, s *record.CharacterState, eventID string, nowMs int64) error {
	if err := db.requireCharacter(ctx, tx, s.CharacterID); err != nil {
		return err
	}
	return db.saveState(ctx, tx, &savedState{CharacterState: *s, SchemaVersion: db.SchemaVersion, SimCoreVersion: db.lastSimCore(s.CharacterID)},
		saveTransferBoundary, eventID, nowMs)
}

// lastSimCore is the simulation build of the character's newest pushed partition (""
// if none was pushed since the store opened): the build whose state a transfer hands over.
func (db *DB) lastSimCore(characterID string) string {
	c := &db.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if key, ok := c.byChar[characterID]; ok {
		if e := c.entries[key]; e != nil {
			return e.snap.Envelope.SimCoreVersion
		}
	}
	return ""
}

// CharacterSaves returns the kept save audit rows of a character, newest first.
func (db *DB) CharacterSaves(ctx context.Context, characterID string) ([]orchestrator.CharacterSave, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT save_id, at_ms, source, ref, map_id, instance_id, revision, schema_version,
		sim_core_version, state_hash FROM character_saves WHERE character_id = ? ORDER BY save_id DESC`, characterID)
	if err != nil {
		return nil, fmt.Errorf("read save audit %q: %w", characterID, err)
	}
	defer rows.Close()
	list := []orchestrator.CharacterSave{}
	for rows.Next() {
		var a orchestrator.CharacterSave
		if err := rows.Scan(&a.SaveID, &a.AtMs, &a.Source, &a.Ref, &a.MapID, &a.InstanceID, &a.Revision, &a.SchemaVersion,
			&a.SimCoreVersion, &a.StateHash); err != nil {
			return nil, fmt.Errorf("read save audit %q: %w", characterID, err)
		}
		list = append(list, a)
	}
	return list, rows.Err()
}
