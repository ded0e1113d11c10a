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

func TestLoadPreviousSecret(t *testing.T) {
	dir := t.TempDir()
	if s, err := orchestrator.LoadPreviousSecret(dir); err != nil || s != "" {
		t.Fatalf("no rotation: %q %v, want none", s, err)
	}
	if err := os.WriteFile(filepath.Join(dir, orchestrator.PreviousSecretFileName), []byte("the-old-root-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := orchestrator.LoadPreviousSecret(dir); err != nil || s != "the-old-root-0123456789" {
		t.Fatalf("after rotation: %q %v", s, err)
	}
}
