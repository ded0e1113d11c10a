package sqlite_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// oldSchema writes a database as a version whose last migration was number upTo left
// it (the migrations 0001 to upTo applied and recorded), for the tests that check an
// upgrade keeps what such a database holds. It returns the database's path, the open
// database (the test closes it before the store opens the file) and a function that
// runs one statement on it, failing the test on an error.
func oldSchema(t *testing.T, upTo int) (path string, raw *sql.DB, exec func(q string, args ...any)) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "mapyard.db")
	raw = mustWritableDB(t, path)
	exec = func(q string, args ...any) {
		t.Helper()
		if _, err := raw.Exec(q, args...); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	exec(`CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at_ms INTEGER NOT NULL)`)
	var old []string
	for n := 1; n <= upTo; n++ {
		f, err := filepath.Glob(fmt.Sprintf("migrations/%04d_*.sql", n))
		if err != nil || len(f) != 1 {
			t.Fatalf("migration %04d: %v %v", n, f, err)
		}
		old = append(old, f[0])
	}
	for _, f := range old {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		exec(string(b))
		exec(`INSERT INTO migrations (name, applied_at_ms) VALUES (?, 1)`, f)
	}
	return path, raw, exec
}
