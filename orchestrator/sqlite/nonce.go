package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// sqlUseNonce marks a nonce used (prepared by writeStmts).
const sqlUseNonce = `INSERT INTO used_nonces (nonce, used_at_ms, expires_at_ms) VALUES (?, ?, ?)
	ON CONFLICT (nonce) DO NOTHING`

// UseNonce durably marks a token nonce used until expiresAt, so the token is redeemed at
// most once even across restarts. It returns ETICKETUSED if the nonce was already used.
// Callers check the token's expiry themselves: a nonce is forgotten once it has expired.
func (db *DB) UseNonce(ctx context.Context, nonce string, expiresAt time.Time) error {
	if err := checkNonce(nonce); err != nil {
		return err
	}
	nowMs := db.Now().UnixMilli()
	return db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return db.useNonceTx(ctx, tx, nonce, nowMs, expiresAt.UnixMilli())
	})
}

// checkNonce refuses a nonce that is not a key (EBADREQUEST), before any write: every
// way of using a nonce asks it.
func checkNonce(nonce string) error {
	if !record.ValidKey(nonce) {
		return apierr.Errorf(apierr.EBADREQUEST, "nonce must be 1 to %d characters", record.MaxKeyLen)
	}
	return nil
}

// useNonceTx marks nonce used inside tx: ETICKETUSED if it already was.
func (db *DB) useNonceTx(ctx context.Context, tx *sql.Tx, nonce string, nowMs, expiresAtMs int64) error {
	res, err := db.stmt(ctx, tx, sqlUseNonce).ExecContext(ctx, nonce, nowMs, expiresAtMs)
	if err != nil {
		return fmt.Errorf("use nonce: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("use nonce: %w", err)
	} else if n == 0 {
		return apierr.Errorf(apierr.ETICKETUSED, "ticket already used")
	}
	return nil
}

// PruneNonces forgets nonces whose tokens have expired and reports how many. The
// checkpoint timer calls it; a token past its expiry is refused before its nonce is
// looked at, so forgetting the nonce reopens nothing.
func (db *DB) PruneNonces(ctx context.Context) (int64, error) {
	var n int64
	nowMs := db.Now().UnixMilli()
	err := db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM used_nonces WHERE expires_at_ms < ?`, nowMs)
		if err != nil {
			return fmt.Errorf("prune nonces: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
