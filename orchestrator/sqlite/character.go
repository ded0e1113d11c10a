package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
)

// errNoSuchCharacter answers every request for a character the identity does not own,
// whether or not it exists, so an answer never tells which.
var errNoSuchCharacter = &apierr.Error{Code: apierr.ENOTFOUND, Message: "no such character"}

// CreateCharacter saves a new persistent character, filling c.ID (if empty) and
// c.CreatedAt; an identity's first character becomes its selected one. The cap and the
// name's uniqueness are checked in the same transaction as the insert, so racing
// creations cannot pass either. See orchestrator.CharacterStore for the error codes.
func (db *DB) CreateCharacter(ctx context.Context, c *orchestrator.Character, max int) error {
	if c.KeyHash == "" || len(c.KeyHash) > record.MaxKeyLen {
		return apierr.Errorf(apierr.EBADREQUEST, "character: key hash required")
	} else if c.Name == "" || len(c.Name) > 128 {
		return apierr.Errorf(apierr.EBADREQUEST, "character: name must be 1 to 128 bytes")
	} else if c.ID != "" && !record.ValidKey(c.ID) {
		return apierr.Errorf(apierr.EBADREQUEST, "character: id longer than %d bytes", record.MaxKeyLen)
	}
	id := c.ID
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		id = hex.EncodeToString(b[:])
	}
	now := db.Now()
	nameKey := orchestrator.CharacterNameKey(c.Name)
	var first bool
	err := db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var owned, sameName, taken int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(name_key = ?2), 0),
			(SELECT COUNT(*) FROM characters WHERE character_id = ?3) FROM characters WHERE key_hash = ?1`,
			c.KeyHash, nameKey, id).Scan(&owned, &sameName, &taken); err != nil {
			return err
		}
		switch {
		case taken != 0:
			return apierr.Errorf(apierr.ECONFLICT, "character already exists")
		case sameName != 0:
			return apierr.Errorf(apierr.EBADREQUEST, "name is already used by another of your characters")
		case max > 0 && owned >= max:
			return apierr.Errorf(apierr.ECHARACTERLIMIT, "an identity may own at most %d characters; delete one first", max)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO characters (character_id, key_hash, name, name_key, created_at_ms) VALUES (?, ?, ?, ?, ?)`,
			id, c.KeyHash, c.Name, nameKey, now.UnixMilli()); err != nil {
			return err
		}
		first = owned == 0
		_, err := tx.ExecContext(ctx, `INSERT INTO character_selection (key_hash, character_id) VALUES (?, ?) ON CONFLICT (key_hash) DO NOTHING`, c.KeyHash, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("create character: %w", err)
	}
	c.ID, c.CreatedAt, c.Selected, c.MapID = id, fromMs(now.UnixMilli()), first, ""
	return nil
}

// charactersSQL lists an identity's characters, the selected one marked (its oldest when
// none is selected) and each with the map it was last saved in.
const charactersSQL = `SELECT c.character_id, c.name, c.created_at_ms, COALESCE(st.map_id, ''),
		c.character_id = COALESCE(sel.character_id,
			(SELECT o.character_id FROM characters o WHERE o.key_hash = c.key_hash ORDER BY o.created_at_ms, o.rowid LIMIT 1))
	FROM characters c
	LEFT JOIN character_selection sel ON sel.key_hash = c.key_hash
	LEFT JOIN character_state st ON st.character_id = c.character_id
	WHERE c.key_hash = ?`

// Characters returns the characters of an identity, oldest first.
func (db *DB) Characters(ctx context.Context, keyHash string) ([]*orchestrator.Character, error) {
	rows, err := db.query(ctx, charactersSQL+` ORDER BY c.created_at_ms, c.rowid`, keyHash)
	if err != nil {
		return nil, fmt.Errorf("list characters: %w", err)
	}
	defer rows.Close()
	list := []*orchestrator.Character{}
	for rows.Next() {
		c, err := scanCharacter(rows, keyHash)
		if err != nil {
			return nil, err
		}
		list = append(list, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list characters: %w", err)
	}
	return list, nil
}

// SelectedCharacter returns the character an identity plays when it names none: the one
// it selected, else its oldest; ENOTFOUND if it owns none.
func (db *DB) SelectedCharacter(ctx context.Context, keyHash string) (*orchestrator.Character, error) {
	row := db.queryRow(ctx, `SELECT c.character_id, c.name, c.created_at_ms, COALESCE(st.map_id, ''), 1
		FROM characters c
		LEFT JOIN character_selection sel ON sel.key_hash = c.key_hash
		LEFT JOIN character_state st ON st.character_id = c.character_id
		WHERE c.key_hash = ? ORDER BY c.character_id IS sel.character_id DESC, c.created_at_ms, c.rowid LIMIT 1`, keyHash)
	c, err := scanCharacter(row, keyHash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, apierr.Errorf(apierr.ENOTFOUND, "no character for this key")
	}
	return c, err
}

// OwnedCharacter returns characterID if keyHash owns it, else ENOTFOUND, whether or not
// the character exists.
func (db *DB) OwnedCharacter(ctx context.Context, keyHash, characterID string) (*orchestrator.Character, error) {
	c, err := scanCharacter(db.queryRow(ctx, charactersSQL+` AND c.character_id = ?`, keyHash, characterID), keyHash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNoSuchCharacter
	}
	return c, err
}

// scanCharacter reads one row of charactersSQL's columns.
func scanCharacter(row interface{ Scan(...any) error }, keyHash string) (*orchestrator.Character, error) {
	c := &orchestrator.Character{KeyHash: keyHash}
	var ms int64
	if err := row.Scan(&c.ID, &c.Name, &ms, &c.MapID, &c.Selected); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		return nil, fmt.Errorf("read character: %w", err)
	}
	c.CreatedAt = fromMs(ms)
	return c, nil
}

// SelectCharacter makes characterID the identity's selected character; ENOTFOUND unless
// keyHash owns it.
func (db *DB) SelectCharacter(ctx context.Context, keyHash, characterID string) error {
	err := db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO character_selection (key_hash, character_id)
			SELECT key_hash, character_id FROM characters WHERE key_hash = ? AND character_id = ?
			ON CONFLICT (key_hash) DO UPDATE SET character_id = excluded.character_id`, keyHash, characterID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errNoSuchCharacter
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("select character: %w", err)
	}
	return nil
}

// DeleteCharacter removes a character keyHash owns, with its saved state, inventory,
// authority lease and snapshot partitions; its critical events and save audit stay, as
// history. ENOTFOUND unless keyHash owns it. The caller makes sure it is not in play.
func (db *DB) DeleteCharacter(ctx context.Context, keyHash, characterID string) error {
	partition := record.CharacterPartition(characterID)
	err := db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM characters WHERE key_hash = ? AND character_id = ?`, keyHash, characterID).Scan(&n); err != nil {
			return err
		} else if n == 0 {
			return errNoSuchCharacter
		}
		for _, q := range []string{
			`DELETE FROM inventory_items WHERE owner_character_id = ?`,
			`DELETE FROM authority_leases WHERE character_id = ?`,
			`DELETE FROM characters WHERE character_id = ?`, // cascades to character_state and the selection
		} {
			if _, err := tx.ExecContext(ctx, q, characterID); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM instance_partitions WHERE partition = ?`, partition)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete character: %w", err)
	}
	db.cache.forgetPartition(partition)
	return nil
}

// RekeyIdentity moves every character of oldHash, and its selection, to newHash. See
// orchestrator.CharacterStore.
func (db *DB) RekeyIdentity(ctx context.Context, oldHash, newHash string) (int64, error) {
	if !record.ValidKey(newHash) || !record.ValidKey(oldHash) {
		return 0, apierr.Errorf(apierr.EBADREQUEST, "character: key hash required")
	}
	var moved int64
	err := db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM characters WHERE key_hash = ?`, newHash).Scan(&n); err != nil {
			return err
		} else if n != 0 {
			return nil // a concurrent join moved them, or the identity started over
		}
		res, err := tx.ExecContext(ctx, `UPDATE characters SET key_hash = ? WHERE key_hash = ?`, newHash, oldHash)
		if err != nil {
			return err
		}
		if moved, err = res.RowsAffected(); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE character_selection SET key_hash = ? WHERE key_hash = ?`, newHash, oldHash)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("rekey identity: %w", err)
	}
	return moved, nil
}

// forgetPartition drops a partition from the cache (its character was deleted).
func (c *snapshotCache) forgetPartition(partition string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key := range c.entries {
		if key.partition == partition {
			delete(c.entries, key)
		}
	}
	if charID, ok := record.CharacterOfPartition(partition); ok {
		delete(c.byChar, charID)
	}
}
