package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
)

var _ orchestrator.AdmissionStore = (*DB)(nil)

// sqlOwnsCharacter finds a character its identity owns (prepared by writeStmts).
const sqlOwnsCharacter = `SELECT 1 FROM characters WHERE character_id = ? AND key_hash = ?`

// Admit records one redeem in one transaction: the nonce used, the transfer a join
// supersedes aborted, the new lease and the accepted transfer. It rides the writer's
// group commit, so a crowd of redeems shares fsyncs. See orchestrator.AdmissionStore.
func (db *DB) Admit(ctx context.Context, a orchestrator.Admission) (superseded bool, err error) {
	if err := checkNonce(a.Nonce); err != nil {
		return false, err
	}
	if a.Owner != "" && a.Lease.CharacterID == "" {
		return false, apierr.Errorf(apierr.EBADREQUEST, "admit: an owner without a lease")
	}
	if a.Lease.CharacterID != "" && (!record.ValidKey(a.Lease.CharacterID) || a.Lease.Epoch <= a.PrevEpoch) {
		return false, apierr.Errorf(apierr.EBADREQUEST, "lease: character id required and epoch must grow")
	}
	nowMs := db.Now().UnixMilli()
	err = db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		superseded = false // a retried function starts afresh
		if err := db.useNonceTx(ctx, tx, a.Nonce, nowMs, a.ExpiresAt.UnixMilli()); err != nil {
			return err
		}
		if a.Owner != "" {
			var one int
			err := db.stmt(ctx, tx, sqlOwnsCharacter).QueryRowContext(ctx, a.Lease.CharacterID, a.Owner).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return errNoSuchCharacter
			} else if err != nil {
				return fmt.Errorf("owner: %w", err)
			}
		}
		if a.Supersede != "" {
			_, err := advanceTransferTx(ctx, tx, a.Supersede, orchestrator.PendingTransferStates(), orchestrator.TransferAborted, "superseded by a join", nowMs)
			switch apierr.Code(err) {
			case "":
				superseded = true
			case apierr.ECONFLICT:
			default:
				return fmt.Errorf("supersede transfer: %w", err)
			}
		}
		if a.Lease.CharacterID != "" {
			if err := db.setLeaseTx(ctx, tx, a.Lease, a.PrevEpoch, nowMs); err != nil {
				return fmt.Errorf("lease: %w", err)
			}
		}
		if a.Accept != "" {
			if _, err := advanceTransferTx(ctx, tx, a.Accept, []orchestrator.TransferState{orchestrator.TransferTokenIssued},
				orchestrator.TransferDestinationAccepted, "", nowMs); err != nil {
				return fmt.Errorf("accept transfer: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("admit: %w", err)
	}
	return superseded, nil
}
