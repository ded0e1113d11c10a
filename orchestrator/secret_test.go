package orchestrator_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mapyard/mapyard/orchestrator"
)

func TestLoadOrCreateSecret(t *testing.T) {
	dir := t.TempDir()
	s1, err := orchestrator.LoadOrCreateSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s1) < 32 {
		t.Fatalf("secret too short: %d chars", len(s1))
	}
	s2, err := orchestrator.LoadOrCreateSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s1 != s2 {
		t.Fatal("second start generated a new secret instead of keeping the first")
	}
	fi, err := os.Stat(filepath.Join(dir, orchestrator.SecretFileName))
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Fatalf("secret file mode %o, want 600", got)
	}
	if other, err := orchestrator.LoadOrCreateSecret(t.TempDir()); err != nil || other == s1 {
		t.Fatalf("another data dir must get its own secret (err=%v)", err)
	}
}
