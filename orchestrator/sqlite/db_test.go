package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/sqlite"
)

// MustOpenDB opens a new database in a temporary directory and closes it when the test ends.
func MustOpenDB(tb testing.TB) *sqlite.DB {
	tb.Helper()
	db := sqlite.NewDB(filepath.Join(tb.TempDir(), "mapyard.db"))
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
	})
	t.Run("ErrPathRequired", func(t *testing.T) {
		if err := sqlite.NewDB("").Open(); err == nil {
			t.Fatal("expected error")
		}
	})
}
