package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
)

var _ orchestrator.TransferStore = (*DB)(nil)

const transferColumns = `transfer_id, character_id, subject, from_instance_id, to_instance_id, state, reason,
	nonce, issued_at_ms, expires_at_ms, created_at_ms, updated_at_ms`

// CreateTransfer saves a new transfer. See orchestrator.TransferStore.
func (db *DB) CreateTransfer(ctx context.Context, t *orchestrator.Transfer) error {
	if !record.ValidKey(t.ID) || !record.ValidKey(t.CharacterID) || !record.ValidKey(t.FromInstanceID) || !record.ValidKey(t.ToInstanceID) {
		return apierr.Errorf(apierr.EBADREQUEST, "transfer: ids must be 1 to %d characters", record.MaxKeyLen)
	}
	now := db.Now()
	err := db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return createTransferTx(ctx, tx, t, now.UnixMilli())
	})
	if err != nil {
		return fmt.Errorf("create transfer: %w", err)
	}
	t.CreatedAt, t.UpdatedAt = fromMs(now.UnixMilli()), fromMs(now.UnixMilli())
	return nil
}

// createTransferTx inserts a new transfer inside tx: ECONFLICT if its id exists.
func createTransferTx(ctx context.Context, tx *sql.Tx, t *orchestrator.Transfer, nowMs int64) error {
	res, err := tx.ExecContext(ctx, `INSERT INTO transfers (`+transferColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (transfer_id) DO NOTHING`,
		t.ID, t.CharacterID, t.Subject, t.FromInstanceID, t.ToInstanceID, string(t.State), t.Reason,
		t.Nonce, t.IssuedAt.UnixMilli(), t.ExpiresAt.UnixMilli(), nowMs, nowMs)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return apierr.Errorf(apierr.ECONFLICT, "transfer %q already exists", t.ID)
	}
	return nil
}

// IssueTransfer writes a transfer request's transfer, final state and lease in one
// transaction, which rides the writer's group commit like a join's Admit: one fsync
// where a transfer used to wait for four in a row. See orchestrator.TransferStore.
func (db *DB) IssueTransfer(ctx context.Context, it orchestrator.TransferIssue) error {
	t, l := it.Transfer, it.Lease
	switch {
	case t == nil || !record.ValidKey(t.ID) || !record.ValidKey(t.CharacterID) || !record.ValidKey(t.FromInstanceID) || !record.ValidKey(t.ToInstanceID):
		return apierr.Errorf(apierr.EBADREQUEST, "issue transfer: ids must be 1 to %d characters", record.MaxKeyLen)
	case t.State != orchestrator.TransferTokenIssued:
		return apierr.Errorf(apierr.EBADREQUEST, "issue transfer: a new transfer is %s, not %s", orchestrator.TransferTokenIssued, t.State)
	case l.CharacterID != t.CharacterID || l.TransferID != t.ID || l.Epoch <= it.PrevEpoch:
		return apierr.Errorf(apierr.EBADREQUEST, "issue transfer: the lease must name the character and the transfer, with a grown epoch")
	case it.Boundary != nil && (it.Boundary.Event.EventID == "" || it.Boundary.Event.Kind != record.EventTransferBoundary):
		return apierr.Errorf(apierr.EBADREQUEST, "issue transfer: the final state must be a %s event", record.EventTransferBoundary)
	}
	now := db.Now()
	err := db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		nowMs := now.UnixMilli()
		if err := createTransferTx(ctx, tx, t, nowMs); err != nil {
			return err
		}
		if it.Boundary != nil {
			if _, err := db.applyCritical(ctx, tx, it.Boundary, nowMs); err != nil {
				return fmt.Errorf("final state: %w", err)
			}
		}
		if err := db.setLeaseTx(ctx, tx, l, it.PrevEpoch, nowMs); err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("issue transfer: %w", err)
	}
	t.CreatedAt, t.UpdatedAt = fromMs(now.UnixMilli()), fromMs(now.UnixMilli())
	return nil
}

// Transfer returns a transfer by id, or ENOTFOUND.
func (db *DB) Transfer(ctx context.Context, id string) (*orchestrator.Transfer, error) {
	t, err := scanTransfer(db.read.QueryRowContext(ctx, `SELECT `+transferColumns+` FROM transfers WHERE transfer_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, apierr.Errorf(apierr.ENOTFOUND, "no transfer %q", id)
	} else if err != nil {
		return nil, fmt.Errorf("read transfer %q: %w", id, err)
	}
	return t, nil
}

// AdvanceTransfer moves a transfer between states as a compare-and-set, so that of two
// racing callers exactly one advances it. See orchestrator.TransferStore.
func (db *DB) AdvanceTransfer(ctx context.Context, id string, from []orchestrator.TransferState, to orchestrator.TransferState, reason string) (*orchestrator.Transfer, error) {
	if len(from) == 0 {
		return nil, apierr.Errorf(apierr.EBADREQUEST, "advance transfer: no from state")
	}
	var t *orchestrator.Transfer
	err := db.exec(ctx, func(ctx context.Context, tx *sql.Tx) (err error) {
		t, err = advanceTransferTx(ctx, tx, id, from, to, reason, db.Now().UnixMilli())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("advance transfer to %s: %w", to, err)
	}
	return t, nil
}

// advanceTransferTx is AdvanceTransfer's compare-and-set inside tx: the transfer as
// updated, ECONFLICT if it is in none of the from states, ENOTFOUND if it is not known.
func advanceTransferTx(ctx context.Context, tx *sql.Tx, id string, from []orchestrator.TransferState, to orchestrator.TransferState, reason string, nowMs int64) (*orchestrator.Transfer, error) {
	args := []any{string(to), reason, nowMs, id}
	marks := make([]string, len(from))
	for i, s := range from {
		marks[i] = "?"
		args = append(args, string(s))
	}
	res, err := tx.ExecContext(ctx, `UPDATE transfers SET state = ?, reason = ?, updated_at_ms = ?
		WHERE transfer_id = ? AND state IN (`+strings.Join(marks, ",")+`)`, args...)
	if err != nil {
		return nil, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, err
	}
	t, err := scanTransfer(tx.QueryRowContext(ctx, `SELECT `+transferColumns+` FROM transfers WHERE transfer_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, apierr.Errorf(apierr.ENOTFOUND, "no transfer %q", id)
	} else if err != nil {
		return nil, err
	}
	if n == 0 {
		return t, apierr.Errorf(apierr.ECONFLICT, "transfer %q is %s, not %v", id, t.State, from)
	}
	return t, nil
}

// PendingTransfers returns transfers neither completed nor aborted, oldest first.
func (db *DB) PendingTransfers(ctx context.Context) ([]*orchestrator.Transfer, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT `+transferColumns+` FROM transfers
		WHERE state NOT IN ('completed', 'aborted') ORDER BY created_at_ms, transfer_id`)
	if err != nil {
		return nil, fmt.Errorf("pending transfers: %w", err)
	}
	defer rows.Close()
	var out []*orchestrator.Transfer
	for rows.Next() {
		t, err := scanTransfer(rows)
		if err != nil {
			return nil, fmt.Errorf("pending transfers: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

type scanner interface{ Scan(dest ...any) error }

func scanTransfer(row scanner) (*orchestrator.Transfer, error) {
	var t orchestrator.Transfer
	var state string
	var issued, expires, created, updated int64
	if err := row.Scan(&t.ID, &t.CharacterID, &t.Subject, &t.FromInstanceID, &t.ToInstanceID, &state, &t.Reason,
		&t.Nonce, &issued, &expires, &created, &updated); err != nil {
		return nil, err
	}
	t.State = orchestrator.TransferState(state)
	t.IssuedAt, t.ExpiresAt, t.CreatedAt, t.UpdatedAt = fromMs(issued), fromMs(expires), fromMs(created), fromMs(updated)
	return &t, nil
}

// Lease returns a character's authority lease; a zero Lease if it never had one.
func (db *DB) Lease(ctx context.Context, characterID string) (orchestrator.Lease, error) {
	l := orchestrator.Lease{CharacterID: characterID}
	var ms int64
	err := db.queryRow(ctx, `SELECT subject, instance_id, epoch, transfer_id, updated_at_ms FROM authority_leases WHERE character_id = ?`, characterID).
		Scan(&l.Subject, &l.InstanceID, &l.Epoch, &l.TransferID, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return orchestrator.Lease{CharacterID: characterID}, nil
	} else if err != nil {
		return l, fmt.Errorf("read lease %q: %w", characterID, err)
	}
	l.UpdatedAt = fromMs(ms)
	return l, nil
}

// SetLease replaces a lease if its epoch is still prevEpoch (0: no lease yet), and
// returns ECONFLICT otherwise: the compare-and-set that keeps a character authoritative
// in at most one map even if two writers race.
func (db *DB) SetLease(ctx context.Context, l orchestrator.Lease, prevEpoch int64) error {
	if !record.ValidKey(l.CharacterID) || l.Epoch <= prevEpoch {
		return apierr.Errorf(apierr.EBADREQUEST, "lease: character id required and epoch must grow")
	}
	nowMs := db.Now().UnixMilli()
	err := db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return db.setLeaseTx(ctx, tx, l, prevEpoch, nowMs)
	})
	if err != nil {
		return fmt.Errorf("set lease: %w", err)
	}
	return nil
}

// sqlSetLease is the lease's compare-and-set (prepared by writeStmts).
const sqlSetLease = `INSERT INTO authority_leases (character_id, subject, instance_id, epoch, transfer_id, updated_at_ms)
	VALUES (?, ?, ?, ?, ?, ?)
	ON CONFLICT (character_id) DO UPDATE SET subject = excluded.subject, instance_id = excluded.instance_id,
		epoch = excluded.epoch, transfer_id = excluded.transfer_id, updated_at_ms = excluded.updated_at_ms
	WHERE authority_leases.epoch = ?`

// setLeaseTx is SetLease's compare-and-set inside tx.
func (db *DB) setLeaseTx(ctx context.Context, tx *sql.Tx, l orchestrator.Lease, prevEpoch, nowMs int64) error {
	res, err := db.stmt(ctx, tx, sqlSetLease).ExecContext(ctx, l.CharacterID, l.Subject, l.InstanceID, l.Epoch, l.TransferID, nowMs, prevEpoch)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return apierr.Errorf(apierr.ECONFLICT, "lease of %q changed since epoch %d", l.CharacterID, prevEpoch)
	}
	return nil
}
