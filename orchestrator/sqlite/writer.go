package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/orchestrator"
)

// writeReq is one request to the writer goroutine: either critical events (one, or a
// map's batch), which the writer group-commits with every other event waiting, or a
// function run in a transaction of its own.
type writeReq struct {
	evs  []orchestrator.CriticalCommit
	fn   func(ctx context.Context, tx *sql.Tx) error
	done chan writeRes // buffered: the writer never blocks on an answer
}

// kind is the request's label in the writer's metrics.
func (r *writeReq) kind() string {
	if r.fn == nil {
		return kindCritical
	}
	return kindWrite
}

// size is what the request counts towards MaxCriticalBatch: its events, or one write.
func (r *writeReq) size() int {
	if r.fn == nil {
		return len(r.evs)
	}
	return 1
}

// writeRes answers a writeReq: err for a write, or for a critical request that failed
// as a whole; otherwise res, one result per event of the request.
type writeRes struct {
	res []orchestrator.CriticalResult
	err error
}

// writeStmts are the write statements, prepared once on the single write connection at
// Open so group commits do not recompile SQL for every event. They cannot be prepared
// lazily: the only connection is busy inside the transaction that would need them.
type writeStmts map[string]*sql.Stmt

// Queries prepared by writeStmts.
const (
	sqlSavepoint   = `SAVEPOINT ev`
	sqlRelease     = `RELEASE ev`
	sqlRollbackTo  = `ROLLBACK TO ev`
	sqlInsertEvent = `INSERT INTO critical_events (event_id, instance_id, kind, map_tick, payload, committed_at_ms)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (event_id) DO NOTHING`
	sqlSelectEvent = `SELECT seq, instance_id, kind, map_tick, payload, committed_at_ms FROM critical_events WHERE event_id = ?`
	sqlCharExists  = `SELECT 1 FROM characters WHERE character_id = ?`
)

func (s writeStmts) prepare(ctx context.Context, db *sql.DB) error {
	for _, q := range []string{sqlSavepoint, sqlRelease, sqlRollbackTo, sqlInsertEvent, sqlSelectEvent, sqlCharExists,
		sqlReadItem, sqlLiveOfTemplate, sqlReadPolicy, sqlUpdateItem, sqlInsertItem, sqlInsertRecovery, upsertPartitionSQL, upsertCharacterStateSQL, insertSaveSQL, pruneSavesSQL, sqlUseNonce, sqlSetLease, sqlOwnsCharacter} {
		stmt, err := db.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		s[q] = stmt
	}
	return nil
}

func (s writeStmts) close() error {
	var errs []error
	for q, stmt := range s {
		errs = append(errs, stmt.Close())
		delete(s, q)
	}
	return errors.Join(errs...)
}

// stmt returns the prepared statement for query bound to tx.
func (db *DB) stmt(ctx context.Context, tx *sql.Tx, query string) *sql.Stmt {
	return tx.StmtContext(ctx, db.stmts[query])
}

// errClosed answers requests made after Close.
var errClosed = &apierr.Error{Code: apierr.EUNAVAILABLE, Message: "store is closed"}

// submit hands r to the writer goroutine and waits for its answer. If ctx ends after the
// writer took r, the outcome is unknown to the caller (the writer still finishes it);
// critical events are idempotent, so the caller retries with the same event id.
func (db *DB) submit(ctx context.Context, r *writeReq) writeRes {
	if db.reqs == nil {
		return writeRes{err: errClosed}
	}
	defer db.Metrics.waited(r.kind(), time.Now())
	r.done = make(chan writeRes, 1)
	select {
	case db.reqs <- r:
	case <-db.writerDone:
		return writeRes{err: errClosed}
	case <-ctx.Done():
		return writeRes{err: ctx.Err()}
	}
	select {
	case res := <-r.done:
		res.err = db.storage(res.err)
		for i := range res.res {
			res.res[i].Err = db.storage(res.res[i].Err)
		}
		return res
	case <-ctx.Done():
		return writeRes{err: ctx.Err()}
	}
}

// errStorageFull answers a write the database could not make room for.
var errStorageFull = apierr.Errorf(apierr.ESTORAGEFULL, "the orchestrator's storage is full: nothing was written; try again once space returns")

// storage turns a write's failure for want of space (SQLITE_FULL: the disk is full, or
// the database reached its page limit) into ESTORAGEFULL, and logs when the store
// starts refusing for that and when a write works again. SQLite rolls the failed
// transaction back and keeps its connection usable, so the store resumes by itself
// once space returns; nothing needs reopening.
func (db *DB) storage(err error) error {
	if err == nil {
		if db.full.Load() && db.full.CompareAndSwap(true, false) {
			db.Logger.Info("database storage available again; writes resume")
		}
		return nil
	}
	var se *msqlite.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_FULL {
		return err
	}
	db.Metrics.storageFull()
	if db.full.CompareAndSwap(false, true) {
		db.Logger.Error("database storage full; durable work is refused with storage_full until space returns", "path", db.Path, "err", err)
	}
	return errStorageFull
}

// exec runs fn in a write transaction of its own on the writer goroutine.
func (db *DB) exec(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return db.submit(ctx, &writeReq{fn: fn}).err
}

// runWriter is the writer goroutine, the only user of the write connection. It takes a
// request and every other one of the same kind already waiting (up to MaxCriticalBatch
// events or writes; the first request is taken whole whatever its size) and commits
// them in one transaction, so one fsync answers the whole group; requests that arrive
// meanwhile wait for the next group. It never waits for more to arrive: an idle writer
// commits at once what it has. Critical events and other writes are grouped apart, so a
// group of events is acknowledged as one.
func (db *DB) runWriter() {
	defer close(db.writerDone)
	ctx := context.Background() // requests outlive their callers' contexts once taken
	var next *writeReq          // a request of the other kind met while gathering
	for {
		r := next
		next = nil
		if r == nil {
			select {
			case <-db.writerStop:
				return
			case r = <-db.reqs:
			}
		}
		batch, n := []*writeReq{r}, r.size()
	gather:
		for n < db.MaxCriticalBatch {
			select {
			case r2 := <-db.reqs:
				if (r2.fn == nil) != (r.fn == nil) || n+r2.size() > db.MaxCriticalBatch {
					next = r2
					break gather
				}
				batch, n = append(batch, r2), n+r2.size()
			default:
				break gather
			}
		}
		if r.fn != nil {
			db.commitWriteBatch(ctx, batch)
		} else {
			db.commitCriticalBatch(ctx, batch)
		}
	}
}

// commitWriteBatch runs the functions of batch in one transaction, each inside its own
// savepoint, so that one that fails is rolled back alone and answered with its error
// while the rest commit: each caller sees the effect of its function alone, as if it had
// run in a transaction of its own after the ones before it. Callers are answered only
// after the commit (synchronous=FULL) has returned. One request runs as it is.
func (db *DB) commitWriteBatch(ctx context.Context, batch []*writeReq) {
	if len(batch) == 1 {
		batch[0].done <- writeRes{err: db.runTx(ctx, batch[0].fn)}
		return
	}
	start := time.Now()
	errs := make([]error, len(batch))
	answer := func() {
		for i, r := range batch {
			r.done <- writeRes{err: errs[i]}
		}
	}
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("begin: %w", err)
		}
		db.Metrics.failed(kindWrite)
		answer()
		return
	}
	defer tx.Rollback()
	savepoint, release, rollbackTo := db.stmt(ctx, tx, sqlSavepoint), db.stmt(ctx, tx, sqlRelease), db.stmt(ctx, tx, sqlRollbackTo)
	for i, r := range batch {
		if _, err := savepoint.ExecContext(ctx); err != nil {
			errs[i] = fmt.Errorf("savepoint: %w", err)
			continue
		}
		if errs[i] = r.fn(ctx, tx); errs[i] != nil {
			db.Metrics.failed(kindWrite)
			if _, err := rollbackTo.ExecContext(ctx); err != nil {
				// The transaction itself is lost (SQLite rolls it back on some
				// errors): nothing of the group is committed.
				lost := fmt.Errorf("write group: rollback: %w", err)
				for j := range errs {
					errs[j] = errors.Join(errs[j], lost)
				}
				db.Metrics.failed(kindWrite)
				answer()
				return
			}
		}
		if _, err := release.ExecContext(ctx); err != nil {
			errs[i] = errors.Join(errs[i], fmt.Errorf("release write: %w", err))
		}
	}
	if err := tx.Commit(); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = fmt.Errorf("commit: %w", err)
			}
		}
		db.Metrics.failed(kindWrite)
	} else {
		db.Metrics.committed(kindWrite, time.Since(start))
		if n := int64(len(batch)); n > db.stats.largestWriteGroup.Load() {
			db.stats.largestWriteGroup.Store(n) // only the writer stores it
		}
	}
	answer()
}

// runTx runs fn in one write transaction and commits it unless fn fails.
func (db *DB) runTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	start := time.Now()
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		db.Metrics.failed(kindWrite)
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(ctx, tx); err != nil {
		db.Metrics.failed(kindWrite)
		return err
	}
	if err := tx.Commit(); err != nil {
		db.Metrics.failed(kindWrite)
		return fmt.Errorf("commit: %w", err)
	}
	db.Metrics.committed(kindWrite, time.Since(start))
	return nil
}

// commitCriticalBatch applies the events of every request of batch, in order, in one
// transaction, each inside its own savepoint so that an event that cannot apply is
// rolled back alone and answered with its error, while the rest of the group commits.
// Callers are answered only after the commit (synchronous=FULL) has returned.
func (db *DB) commitCriticalBatch(ctx context.Context, batch []*writeReq) {
	start := time.Now()
	res := make([][]orchestrator.CriticalResult, len(batch))
	events := 0
	for i, r := range batch {
		res[i] = make([]orchestrator.CriticalResult, len(r.evs))
		events += len(r.evs)
	}
	answer := func() {
		for i, r := range batch {
			r.done <- writeRes{res: res[i]}
		}
	}
	failAll := func(err error) {
		for _, rs := range res {
			for j := range rs {
				if rs[j].Err == nil {
					rs[j] = orchestrator.CriticalResult{Err: err}
				}
			}
		}
	}
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		failAll(fmt.Errorf("begin critical batch: %w", err))
		db.Metrics.failed(kindCritical)
		answer()
		return
	}
	defer tx.Rollback()

	nowMs := db.Now().UnixMilli()
	savepoint, release, rollbackTo := db.stmt(ctx, tx, sqlSavepoint), db.stmt(ctx, tx, sqlRelease), db.stmt(ctx, tx, sqlRollbackTo)
	for i, r := range batch {
		for j := range r.evs {
			c, out := &r.evs[j], &res[i][j]
			if _, err := savepoint.ExecContext(ctx); err != nil {
				out.Err = fmt.Errorf("savepoint: %w", err)
				continue
			}
			out.Ack, out.Err = db.applyCritical(ctx, tx, c, nowMs)
			if out.Err != nil {
				if _, err := rollbackTo.ExecContext(ctx); err != nil {
					out.Err = errors.Join(out.Err, fmt.Errorf("rollback event %q: %w", c.Event.EventID, err))
				}
			}
			if _, err := release.ExecContext(ctx); err != nil {
				out.Err = errors.Join(out.Err, fmt.Errorf("release event %q: %w", c.Event.EventID, err))
			}
		}
	}
	if err := tx.Commit(); err != nil {
		failAll(fmt.Errorf("commit critical batch: %w", err))
		db.Metrics.failed(kindCritical)
	} else {
		db.Metrics.committed(kindCritical, time.Since(start))
		db.Metrics.grouped(events)
		n := int64(events)
		db.stats.criticalCommits.Add(1)
		db.stats.criticalEvents.Add(n)
		if n > db.stats.largestGroup.Load() {
			db.stats.largestGroup.Store(n) // only the writer stores it
		}
	}
	answer()
}
