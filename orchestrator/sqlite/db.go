// Package sqlite is the orchestrator's persistence over modernc.org/sqlite (pure Go, so
// every binary stays CGO_ENABLED=0). The orchestrator is the only process that writes the
// database; inside it, one write connection is owned by one writer goroutine that callers
// reach through a channel, and reads go through a separate pool.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
)

// DefaultCheckpointInterval is how often snapshots cached in memory are flushed when
// DB.CheckpointInterval is left at zero (ORCH_CHECKPOINT_MS's default).
const DefaultCheckpointInterval = 5 * time.Minute

// DefaultMaxCriticalBatch caps how many waiting critical events (or other writes) one
// group commit takes, which bounds the transaction a single fsync covers.
const DefaultMaxCriticalBatch = 1024

// DefaultReadConns is the size of the read pool.
const DefaultReadConns = 4

// Compile-time proof that DB is a complete orchestrator store.
var _ orchestrator.Store = (*DB)(nil)

// DB is the orchestrator's SQLite database. Create it with NewDB, adjust its exported
// fields, then Open it; Close it once at shutdown, which also writes a final checkpoint.
type DB struct {
	// Path of the database file. Its directory must exist.
	Path string

	// Now returns the current time; tests replace it to control TTLs and checkpoints.
	Now func() time.Time

	// CheckpointInterval is how often cached snapshots are flushed (ORCH_CHECKPOINT_MS).
	// A negative value disables the timer: only Checkpoint and Close flush.
	CheckpointInterval time.Duration

	// MaxCriticalBatch caps the requests of one group commit: critical events, or
	// other writes (they are grouped apart). 1 commits every request in its own
	// transaction, which benchmarks use as the baseline.
	MaxCriticalBatch int

	// MaxPayloadBytes caps one snapshot payload (record.MaxSnapshotPayloadBytes).
	MaxPayloadBytes int

	// SchemaVersion is the snapshot schema version the store keeps payloads in
	// (record.SnapshotSchemaVersion). Pushed and stored snapshots of older versions
	// are upgraded through SnapshotMigrations; any other version is refused with
	// ESCHEMAVERSION, and Open fails rather than load a stored one it cannot upgrade.
	SchemaVersion int

	// SnapshotMigrations upgrades payloads from version k to k+1, keyed by k.
	SnapshotMigrations map[int]record.SnapshotMigration

	// SaveAuditKeep is how many save audit rows are kept per character
	// (ORCH_SAVE_AUDIT_KEEP): every checkpoint or transfer boundary that changes a
	// character's saved state appends one, and older ones are removed.
	SaveAuditKeep int

	// Logger receives failures of background checkpoints, which have no caller to
	// return them to (the cache keeps the rows and the next checkpoint retries).
	Logger *slog.Logger

	// Metrics records commit latency, snapshot ingest and checkpoints; nil records
	// nothing. Set it before Open.
	Metrics *Metrics

	write *sql.DB  // exactly one connection, used only by the writer goroutine
	read  *sql.DB  // read pool; WAL lets readers run beside the writer
	reads sync.Map // query → *sql.Stmt prepared on read (see readStmt)
	stmts writeStmts

	reqs       chan *writeReq // to the writer goroutine
	writerStop chan struct{}  // closed by Close to stop the writer
	writerDone chan struct{}  // closed when the writer has exited

	ctx    context.Context // cancelled by Close; stops the checkpoint timer
	cancel context.CancelCauseFunc
	g      errgroup.Group

	ckptMu sync.Mutex // one checkpoint at a time
	cache  snapshotCache

	recovery  Recovery
	stats     stats
	full      atomic.Bool // the last write failed for want of space (see storage)
	closeOnce sync.Once
	closeErr  error
}

// NewDB returns a DB for the file at path with default settings. It does not touch the
// file until Open.
func NewDB(path string) *DB {
	return &DB{
		Path:               path,
		Now:                time.Now,
		CheckpointInterval: DefaultCheckpointInterval,
		MaxCriticalBatch:   DefaultMaxCriticalBatch,
		MaxPayloadBytes:    record.MaxSnapshotPayloadBytes,
		SchemaVersion:      record.SnapshotSchemaVersion,
		SaveAuditKeep:      DefaultSaveAuditKeep,
		Logger:             slog.Default(),
	}
}

// DSN returns the modernc.org/sqlite data source name for path with mapyard's pragmas:
// WAL, a busy timeout and foreign keys. The write form adds synchronous=FULL, so every
// commit is fsync'd before it returns (what makes a critical-event ack durable; group
// commit pays one fsync per batch), and IMMEDIATE transactions, so the writer takes the
// lock when it begins instead of failing on upgrade. The read-only form is query_only.
func DSN(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "foreign_keys(1)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "synchronous(FULL)")
		q.Add("_txlock", "immediate")
	}
	return "file:" + uriPath.Replace(path) + "?" + q.Encode()
}

// uriPath escapes what a file: URI would otherwise read as its query or fragment (and
// the escape character itself), so that a path with '?' or '#' in it names that file
// and not another.
var uriPath = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// Open opens the database file, creating it if needed, applies pending migrations,
// rehydrates the snapshot cache from the last checkpoint and starts the writer and the
// checkpoint timer.
func (db *DB) Open() (err error) {
	if db.Path == "" {
		return errors.New("sqlite: path required")
	}
	if db.Now == nil {
		db.Now = time.Now
	}
	if db.CheckpointInterval == 0 {
		db.CheckpointInterval = DefaultCheckpointInterval
	}
	if db.MaxCriticalBatch <= 0 {
		db.MaxCriticalBatch = DefaultMaxCriticalBatch
	}
	if db.MaxPayloadBytes <= 0 {
		db.MaxPayloadBytes = record.MaxSnapshotPayloadBytes
	}
	if db.Logger == nil {
		db.Logger = slog.Default()
	}
	if db.SaveAuditKeep <= 0 {
		db.SaveAuditKeep = DefaultSaveAuditKeep
	}
	if db.SchemaVersion <= 0 {
		db.SchemaVersion = record.SnapshotSchemaVersion
	}
	ctx := context.Background()

	if db.write, err = sql.Open("sqlite", DSN(db.Path, false)); err != nil {
		return fmt.Errorf("open %q: %w", db.Path, err)
	}
	db.write.SetMaxOpenConns(1)
	db.write.SetMaxIdleConns(1)
	db.write.SetConnMaxIdleTime(0)
	db.write.SetConnMaxLifetime(0)
	if err := db.migrate(ctx); err != nil {
		db.write.Close()
		return fmt.Errorf("migrate %q: %w", db.Path, err)
	}
	db.stmts = writeStmts{}
	if err := db.stmts.prepare(ctx, db.write); err != nil {
		db.write.Close()
		return fmt.Errorf("prepare %q: %w", db.Path, err)
	}
	if db.read, err = sql.Open("sqlite", DSN(db.Path, true)); err != nil {
		db.write.Close()
		return fmt.Errorf("open read pool %q: %w", db.Path, err)
	}
	db.read.SetMaxOpenConns(DefaultReadConns)
	db.read.SetMaxIdleConns(DefaultReadConns)
	if err := db.rehydrate(ctx); err != nil {
		db.read.Close()
		db.write.Close()
		return fmt.Errorf("rehydrate %q: %w", db.Path, err)
	}

	db.reqs = make(chan *writeReq)
	db.writerStop = make(chan struct{})
	db.writerDone = make(chan struct{})
	db.ctx, db.cancel = context.WithCancelCause(context.Background())
	go db.runWriter()
	if db.CheckpointInterval > 0 {
		db.g.Go(db.runCheckpointTimer)
	}
	return nil
}

// Close stops the checkpoint timer, writes a final checkpoint of every cached snapshot,
// stops the writer and closes both connection pools. Snapshots pushed once Close has
// begun are refused with EUNAVAILABLE rather than accepted and lost. Calls after the
// first return the first call's result.
func (db *DB) Close() error {
	db.closeOnce.Do(func() { db.closeErr = db.close() })
	return db.closeErr
}

func (db *DB) close() error {
	var errs []error
	if db.cancel != nil {
		db.cancel(errors.New("sqlite: db closed"))
		errs = append(errs, db.g.Wait())
		db.cache.mu.Lock()
		db.cache.closed = true
		db.cache.mu.Unlock()
		if _, err := db.Checkpoint(context.Background()); err != nil {
			errs = append(errs, fmt.Errorf("final checkpoint: %w", err))
		}
		close(db.writerStop)
		<-db.writerDone
	}
	if db.read != nil {
		errs = append(errs, db.closeReads(), db.read.Close())
	}
	if db.stmts != nil {
		errs = append(errs, db.stmts.close())
	}
	if db.write != nil {
		errs = append(errs, db.write.Close())
	}
	return errors.Join(errs...)
}

// JournalMode reports the database's journal mode ("wal" once Open has run).
func (db *DB) JournalMode(ctx context.Context) (mode string, err error) {
	err = db.read.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode)
	return mode, err
}

// IntegrityCheck runs SQLite's full integrity check and returns an error describing the
// first problem unless the database is "ok". Operators and crash tests use it.
func (db *DB) IntegrityCheck(ctx context.Context) error {
	var res string
	if err := db.read.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&res); err != nil {
		return fmt.Errorf("integrity check: %w", err)
	} else if res != "ok" {
		return fmt.Errorf("integrity check: %s", res)
	}
	return nil
}

// Stats counts the writer's work since Open, for metrics and for tests that check
// group commit really groups.
type Stats struct {
	// CriticalCommits is how many critical-event transactions committed.
	CriticalCommits int64
	// CriticalEvents is how many events those transactions carried (retries included).
	CriticalEvents int64
	// LargestGroup is the most events one transaction carried.
	LargestGroup int64
	// Checkpoints is how many checkpoints completed.
	Checkpoints int64
	// LargestWriteGroup is the most other writes (leases, nonces, redeems, ...) one
	// transaction carried.
	LargestWriteGroup int64
}

// stats holds Stats as atomics, written by the writer and read by anyone.
type stats struct {
	criticalCommits, criticalEvents, largestGroup, checkpoints, largestWriteGroup atomic.Int64
}

// Stats returns the writer's counters.
func (db *DB) Stats() Stats {
	return Stats{
		CriticalCommits:   db.stats.criticalCommits.Load(),
		CriticalEvents:    db.stats.criticalEvents.Load(),
		LargestGroup:      db.stats.largestGroup.Load(),
		Checkpoints:       db.stats.checkpoints.Load(),
		LargestWriteGroup: db.stats.largestWriteGroup.Load(),
	}
}

// runCheckpointTimer flushes the snapshot cache every CheckpointInterval and prunes
// expired nonces until Close. A failed checkpoint is retried at the next tick: the cache
// still holds everything it did not write.
func (db *DB) runCheckpointTimer() error {
	t := time.NewTicker(db.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-db.ctx.Done():
			return nil
		case <-t.C:
			if _, err := db.Checkpoint(db.ctx); err != nil && db.ctx.Err() == nil {
				if apierr.Code(err) != apierr.ESTORAGEFULL { // logged once, by storage
					db.Logger.Error("checkpoint failed; cached snapshots kept for the next one", "path", db.Path, "err", err)
				}
			}
			if _, err := db.PruneNonces(db.ctx); err != nil && db.ctx.Err() == nil {
				db.Logger.Error("prune nonces failed", "path", db.Path, "err", err)
			}
		}
	}
}

// readStmt returns query prepared on the read pool, preparing it on first use. The hot
// reads of joins and the character API go through it: compiling their SQL cost more
// than running it. database/sql re-prepares a statement on each pooled connection the
// first time it runs there.
func (db *DB) readStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if s, ok := db.reads.Load(query); ok {
		return s.(*sql.Stmt), nil
	}
	s, err := db.read.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare read: %w", err)
	}
	if prev, loaded := db.reads.LoadOrStore(query, s); loaded {
		s.Close()
		return prev.(*sql.Stmt), nil
	}
	return s, nil
}

// queryRow runs a prepared read returning at most one row.
func (db *DB) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	s, err := db.readStmt(ctx, query)
	if err != nil {
		return db.read.QueryRowContext(ctx, query, args...) // reports the same error at Scan
	}
	return s.QueryRowContext(ctx, args...)
}

// query runs a prepared read.
func (db *DB) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s, err := db.readStmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

// closeReads closes the prepared reads.
func (db *DB) closeReads() error {
	var errs []error
	db.reads.Range(func(k, v any) bool {
		errs = append(errs, v.(*sql.Stmt).Close())
		db.reads.Delete(k)
		return true
	})
	return errors.Join(errs...)
}
