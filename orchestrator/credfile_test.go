package orchestrator_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mapyard/mapyard/orchestrator"
)

func TestWriteCredentialFile(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"mt1.first", "mt1.second"} {
		if err := orchestrator.WriteCredentialFile(dir, orchestrator.MetricsCredentialFileName, v); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, orchestrator.MetricsCredentialFileName)
		buf, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(buf), v+"\n"; got != want {
			t.Fatalf("file holds %q, want %q", got, want)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("dir holds %d files, want only the credential", len(entries))
	}
	t.Run("ErrNoDir", func(t *testing.T) {
		if err := orchestrator.WriteCredentialFile(filepath.Join(dir, "missing"), "x", "y"); err == nil {
			t.Fatal("no error for a missing directory")
		}
	})
}
