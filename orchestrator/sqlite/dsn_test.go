package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/sqlite"
)

// TestDSN_PathWithURICharacters opens a database whose path holds the characters a
// file: URI gives meaning to ('?', '#', '%') and checks that the file is created under
// that very name, not under the part of it before the first of them.
func TestDSN_PathWithURICharacters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a#b?c%20d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "mapyard#1.db")
	db := sqlite.NewDB(path)
	if err := db.Open(); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the database is not at %s: %v", path, err)
	}
}
