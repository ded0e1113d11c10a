// Package sqlite is the orchestrator's persistence over modernc.org/sqlite (pure Go, so
// every binary stays CGO_ENABLED=0). The orchestrator is the only process that writes the
// database; inside it, one write connection is owned by one writer goroutine and reads go
// through a separate pool.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"sort"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// DB is the orchestrator's SQLite database. Create it with NewDB, then Open it; Close it
// once at shutdown.
type DB struct {
	// Path of the database file. Its directory must exist.
	Path string

	// Now returns the current time; tests replace it to control TTLs and checkpoints.
	Now func() time.Time

	write *sql.DB // exactly one connection: SQLite has one writer at a time anyway
	read  *sql.DB // read pool; WAL lets readers run beside the writer
}

// NewDB returns a DB for the file at path. It does not touch the file until Open.
func NewDB(path string) *DB {
	return &DB{Path: path, Now: time.Now}
}

// DSN returns the modernc.org/sqlite data source name for path with mapyard's pragmas:
// WAL, a busy timeout, foreign keys and IMMEDIATE write transactions, so a writer takes
// the lock when it begins instead of failing on upgrade.
func DSN(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_txlock", "immediate")
	if readOnly {
		q.Add("mode", "ro")
	}
	return "file:" + path + "?" + q.Encode()
}

// Open opens the database file, creating it if needed, and applies pending migrations.
func (db *DB) Open() (err error) {
	if db.Path == "" {
		return errors.New("sqlite: path required")
	}
	if db.write, err = sql.Open("sqlite", DSN(db.Path, false)); err != nil {
		return fmt.Errorf("open %q: %w", db.Path, err)
	}
	db.write.SetMaxOpenConns(1)
	db.write.SetConnMaxIdleTime(0)
	if err := db.migrate(context.Background()); err != nil {
		db.write.Close()
		return fmt.Errorf("migrate %q: %w", db.Path, err)
	}
	if db.read, err = sql.Open("sqlite", DSN(db.Path, false)); err != nil {
		db.write.Close()
		return fmt.Errorf("open read pool %q: %w", db.Path, err)
	}
	db.read.SetMaxOpenConns(4)
	return nil
}

// Close closes both connection pools.
func (db *DB) Close() error {
	var errs []error
	if db.read != nil {
		errs = append(errs, db.read.Close())
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

// migrate applies every embedded migration not yet recorded, in file-name order, each in
// its own transaction together with its record, so a crash never leaves one half applied.
func (db *DB) migrate(ctx context.Context) error {
	if _, err := db.write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at_ms INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create migrations table: %w", err)
	}
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		if err := db.migrateFile(ctx, name); err != nil {
			return fmt.Errorf("migration %s: %w", name, err)
		}
	}
	return nil
}

func (db *DB) migrateFile(ctx context.Context, name string) error {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()

	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM migrations WHERE name = ?`, name).Scan(&n); err != nil {
		return err
	} else if n != 0 {
		return nil // already applied
	}
	buf, err := fs.ReadFile(migrationFS, name)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, string(buf)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO migrations (name, applied_at_ms) VALUES (?, ?)`, name, db.Now().UnixMilli()); err != nil {
		return err
	}
	return tx.Commit()
}
