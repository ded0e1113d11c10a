package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/apierr"
	"github.com/mapyard/mapyard/orchestrator/control"
)

// CreateCharacter saves a new persistent character, filling c.ID (if empty) and
// c.CreatedAt. See orchestrator.CharacterStore for the error codes.
func (db *DB) CreateCharacter(ctx context.Context, c *orchestrator.Character) error {
	if c.KeyHash == "" || len(c.KeyHash) > control.MaxKeyLen {
		return apierr.Errorf(apierr.EBADREQUEST, "character: key hash required")
	} else if len(c.Name) > 64 {
		return apierr.Errorf(apierr.EBADREQUEST, "character: name longer than 64 bytes")
	} else if c.ID != "" && !control.ValidKey(c.ID) {
		return apierr.Errorf(apierr.EBADREQUEST, "character: id longer than %d bytes", control.MaxKeyLen)
	}
	id := c.ID
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		id = hex.EncodeToString(b[:])
	}
	now := db.Now()
	err := db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM characters WHERE character_id = ? OR key_hash = ?`, id, c.KeyHash).Scan(&n); err != nil {
			return err
		} else if n != 0 {
			return apierr.Errorf(apierr.ECONFLICT, "character already exists")
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO characters (character_id, key_hash, name, created_at_ms) VALUES (?, ?, ?, ?)`,
			id, c.KeyHash, c.Name, now.UnixMilli())
		return err
	})
	if err != nil {
		return fmt.Errorf("create character: %w", err)
	}
	c.ID, c.CreatedAt = id, fromMs(now.UnixMilli())
	return nil
}

// FindCharacterByKeyHash returns the character of a keyed authKey hash, or ENOTFOUND.
func (db *DB) FindCharacterByKeyHash(ctx context.Context, keyHash string) (*orchestrator.Character, error) {
	c := &orchestrator.Character{KeyHash: keyHash}
	var ms int64
	err := db.read.QueryRowContext(ctx, `SELECT character_id, name, created_at_ms FROM characters WHERE key_hash = ?`, keyHash).
		Scan(&c.ID, &c.Name, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, apierr.Errorf(apierr.ENOTFOUND, "no character for this key")
	} else if err != nil {
		return nil, fmt.Errorf("find character: %w", err)
	}
	c.CreatedAt = fromMs(ms)
	return c, nil
}

// RekeyCharacter replaces a character's key hash. See orchestrator.CharacterStore.
func (db *DB) RekeyCharacter(ctx context.Context, characterID, oldHash, newHash string) error {
	if !control.ValidKey(newHash) {
		return apierr.Errorf(apierr.EBADREQUEST, "character: key hash required")
	}
	err := db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE characters SET key_hash = ? WHERE character_id = ? AND key_hash = ?`, newHash, characterID, oldHash)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return apierr.Errorf(apierr.ENOTFOUND, "character %q has no such key hash", characterID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rekey character: %w", err)
	}
	return nil
}

// CharacterState returns where a character was last saved: its durable state, unless the
// cache holds a newer character partition that is not checkpointed yet.
func (db *DB) CharacterState(ctx context.Context, characterID string) (*control.CharacterState, error) {
	s := &control.CharacterState{CharacterID: characterID}
	var attrs string
	var ms int64
	err := db.read.QueryRowContext(ctx, `SELECT map_id, instance_id, x, y, attributes_json, revision, updated_at_ms
		FROM character_state WHERE character_id = ?`, characterID).
		Scan(&s.MapID, &s.InstanceID, &s.X, &s.Y, &attrs, &s.Revision, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		s = nil
	} else if err != nil {
		return nil, fmt.Errorf("read character state %q: %w", characterID, err)
	} else {
		s.Attributes, s.UpdatedAt = json.RawMessage(attrs), fromMs(ms)
	}

	c := &db.cache
	c.mu.Lock()
	if key, ok := c.byChar[characterID]; ok {
		if e := c.entries[key]; e != nil && e.char != nil && (s == nil || e.snap.Revision > s.Revision) {
			s = &control.CharacterState{
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

// upsertCharacterStateSQL writes a character's state unless a newer revision is stored,
// and only for characters that exist (disposable session characters are never saved).
const upsertCharacterStateSQL = `INSERT INTO character_state (character_id, map_id, instance_id, x, y,
	attributes_json, revision, updated_at_ms)
	SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8 WHERE EXISTS (SELECT 1 FROM characters WHERE character_id = ?1)
	ON CONFLICT (character_id) DO UPDATE SET map_id = excluded.map_id, instance_id = excluded.instance_id,
		x = excluded.x, y = excluded.y, attributes_json = excluded.attributes_json,
		revision = excluded.revision, updated_at_ms = excluded.updated_at_ms
	WHERE excluded.revision > character_state.revision`

// characterStateArgs returns the arguments of upsertCharacterStateSQL.
func characterStateArgs(charID, mapID, instanceID string, x, y float64, attrs json.RawMessage, revision, nowMs int64) []any {
	a := "{}"
	if len(attrs) > 0 {
		a = string(attrs)
	}
	return []any{charID, mapID, instanceID, x, y, a, revision, nowMs}
}

// putCharacterState applies a transfer_boundary event: the character must exist, and an
// older revision than the stored one leaves the state alone (the event is still recorded).
func (db *DB) putCharacterState(ctx context.Context, tx *sql.Tx, s *control.CharacterState, nowMs int64) error {
	if err := db.requireCharacter(ctx, tx, s.CharacterID); err != nil {
		return err
	}
	_, err := db.stmt(ctx, tx, upsertCharacterStateSQL).ExecContext(ctx,
		characterStateArgs(s.CharacterID, s.MapID, s.InstanceID, s.X, s.Y, s.Attributes, s.Revision, nowMs)...)
	return err
}
