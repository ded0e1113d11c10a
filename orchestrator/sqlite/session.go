package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/orchestrator"
)

// HeldLeases returns the leases of saved characters that name an instance or a transfer
// in flight. See orchestrator.TransferStore.
func (db *DB) HeldLeases(ctx context.Context) ([]orchestrator.Session, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT l.character_id, l.subject, l.instance_id, l.transfer_id, l.epoch, l.updated_at_ms,
			COALESCE(c.name, ''), t.transfer_id, t.state, t.from_instance_id, t.to_instance_id, t.updated_at_ms
		FROM authority_leases l
		LEFT JOIN characters c ON c.character_id = l.character_id
		LEFT JOIN transfers t ON t.transfer_id =
			(SELECT transfer_id FROM transfers WHERE character_id = l.character_id ORDER BY created_at_ms DESC, transfer_id DESC LIMIT 1)
		WHERE l.instance_id != '' OR l.transfer_id != ''
		ORDER BY l.updated_at_ms DESC, l.character_id`)
	if err != nil {
		return nil, fmt.Errorf("held leases: %w", err)
	}
	defer rows.Close()
	list := []orchestrator.Session{}
	for rows.Next() {
		var s orchestrator.Session
		var subject string
		var trID, trState, trFrom, trTo sql.NullString
		var trAt sql.NullInt64
		if err := rows.Scan(&s.CharacterID, &subject, &s.InstanceID, &s.TransferID, &s.Epoch, &s.SinceMs, &s.Name,
			&trID, &trState, &trFrom, &trTo, &trAt); err != nil {
			return nil, fmt.Errorf("held leases: %w", err)
		}
		s.Identity = orchestrator.IdentityPrefix(subject)
		if trID.Valid {
			s.LastTransfer = &orchestrator.TransferSummary{TransferID: trID.String, State: orchestrator.TransferState(trState.String),
				FromInstanceID: trFrom.String, ToInstanceID: trTo.String, UpdatedAtMs: trAt.Int64}
		}
		list = append(list, s)
	}
	return list, rows.Err()
}

// LastTransfer returns a character's newest transfer, or ENOTFOUND.
func (db *DB) LastTransfer(ctx context.Context, characterID string) (*orchestrator.Transfer, error) {
	t, err := scanTransfer(db.read.QueryRowContext(ctx, `SELECT `+transferColumns+` FROM transfers
		WHERE character_id = ? ORDER BY created_at_ms DESC, transfer_id DESC LIMIT 1`, characterID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, apierr.Errorf(apierr.ENOTFOUND, "character %q never transferred", characterID)
	} else if err != nil {
		return nil, fmt.Errorf("last transfer of %q: %w", characterID, err)
	}
	return t, nil
}

// PruneFinishedTransfers removes finished transfers whose token expired before now. See
// orchestrator.TransferStore.
func (db *DB) PruneFinishedTransfers(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM transfers WHERE state IN ('completed', 'aborted') AND expires_at_ms < ?`, now.UnixMilli())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune transfers: %w", err)
	}
	return n, nil
}
