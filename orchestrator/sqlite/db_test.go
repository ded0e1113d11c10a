package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
)

// MustOpenDB opens a new database in a temporary directory and closes it when the test
// ends. opts adjust the DB before Open.
func MustOpenDB(tb testing.TB, opts ...func(*sqlite.DB)) *sqlite.DB {
	tb.Helper()
	return MustOpenDBAt(tb, filepath.Join(tb.TempDir(), "mapyard.db"), opts...)
}

// MustOpenDBAt opens the database at path and closes it when the test ends.
func MustOpenDBAt(tb testing.TB, path string, opts ...func(*sqlite.DB)) *sqlite.DB {
	tb.Helper()
	db := sqlite.NewDB(path)
	for _, o := range opts {
		o(db)
	}
	if err := db.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Error(err)
		}
	})
	return db
}

// MustRawDB opens the database file read-only with database/sql, for checks the store's
// API does not offer (row counts, the audit log).
func MustRawDB(tb testing.TB, path string) *sql.DB {
	tb.Helper()
	raw, err := sql.Open("sqlite", sqlite.DSN(path, true))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { raw.Close() })
	return raw
}

// MustCount returns the result of a COUNT(*) query.
func MustCount(tb testing.TB, raw *sql.DB, query string, args ...any) int {
	tb.Helper()
	var n int
	if err := raw.QueryRow(query, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	return n
}

// WantCode fails the test unless err carries the application error code want.
func WantCode(tb testing.TB, err error, want string) {
	tb.Helper()
	if got := apierr.Code(err); got != want {
		tb.Fatalf("error code=%q (%v), want %q", got, err, want)
	}
}

func TestDB_Open(t *testing.T) {
	t.Run("WAL", func(t *testing.T) {
		db := MustOpenDB(t)
		if mode, err := db.JournalMode(context.Background()); err != nil {
			t.Fatal(err)
		} else if got, want := mode, "wal"; got != want {
			t.Fatalf("journal_mode=%q, want %q", got, want)
		}
	})
	t.Run("ReopenKeepsMigrations", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "mapyard.db")
		for i := 0; i < 2; i++ {
			db := sqlite.NewDB(path)
			if err := db.Open(); err != nil {
				t.Fatalf("open #%d: %v", i, err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
		raw := MustRawDB(t, path)
		files, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
		if err != nil || len(files) == 0 {
			t.Fatalf("migration files: %v", err)
		}
		if got, want := MustCount(t, raw, `SELECT COUNT(*) FROM migrations`), len(files); got != want {
			t.Fatalf("migrations=%d, want %d", got, want)
		}
	})
	t.Run("StructuredTables", func(t *testing.T) {
		db := MustOpenDB(t)
		raw := MustRawDB(t, db.Path)
		for _, table := range []string{"map_instances", "characters", "character_state", "inventory_items",
			"instance_partitions", "critical_events", "checkpoints", "transfers", "used_nonces", "audit_log", "authority_leases"} {
			if MustCount(t, raw, `SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, table) != 1 {
				t.Errorf("table %s missing", table)
			}
		}
	})
	t.Run("IntegrityOK", func(t *testing.T) {
		if err := MustOpenDB(t).IntegrityCheck(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ErrPathRequired", func(t *testing.T) {
		if err := sqlite.NewDB("").Open(); err == nil {
			t.Fatal("expected error")
		}
	})
	t.Run("ErrClosed", func(t *testing.T) {
		db := sqlite.NewDB(filepath.Join(t.TempDir(), "mapyard.db"))
		if err := db.Open(); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		err := db.UseNonce(context.Background(), "n", time.Now())
		WantCode(t, err, apierr.EUNAVAILABLE)
		if err := db.Close(); err != nil {
			t.Fatalf("second close: %v", err)
		}
	})
}

func TestDB_AuditLogAppendOnly(t *testing.T) {
	db := MustOpenDB(t)
	MustCommit(t, db, record.CriticalEvent{EventID: "e1", InstanceID: "i1", Kind: "quest_flag", Payload: []byte(`{}`)})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rw, err := sql.Open("sqlite", sqlite.DSN(db.Path, false))
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if got, want := MustCount(t, rw, `SELECT COUNT(*) FROM audit_log WHERE kind = 'critical_event' AND ref = 'e1'`), 1; got != want {
		t.Fatalf("audit rows=%d, want %d", got, want)
	}
	for _, q := range []string{`UPDATE audit_log SET detail = 'x'`, `DELETE FROM audit_log`, `DELETE FROM critical_events`} {
		if _, err := rw.Exec(q); err == nil {
			t.Errorf("%s: expected error", q)
		} else if errors.Is(err, sql.ErrConnDone) {
			t.Fatal(err)
		}
	}
}
