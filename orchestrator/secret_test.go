package orchestrator_test

import (
	"errors"
	"io/fs"
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

// TestConfig_RootSecret: the variable wins over the file; without it the file beside
// the database is read, by the orchestrator (which creates it on its first start) and
// by its clients (which never do).
func TestConfig_RootSecret(t *testing.T) {
	t.Run("FromVariable", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := orchestrator.LoadOrCreateSecret(dir); err != nil {
			t.Fatal(err)
		}
		cfg := orchestrator.Config{DBPath: filepath.Join(dir, "mapyard.db")}
		cfg.Secret = "from-the-environment-0123"
		for _, load := range []func() (string, error){cfg.RootSecret, cfg.LoadOrCreateRootSecret} {
			if s, err := load(); err != nil || s != cfg.Secret {
				t.Fatalf("got %q %v, want the variable's", s, err)
			}
		}
	})
	t.Run("FromFile", func(t *testing.T) {
		dir := t.TempDir()
		cfg := orchestrator.Config{DBPath: filepath.Join(dir, "mapyard.db")}
		created, err := cfg.LoadOrCreateRootSecret()
		if err != nil {
			t.Fatal(err)
		}
		if s, err := cfg.RootSecret(); err != nil || s != created {
			t.Fatalf("got %q %v, want the secret the orchestrator created", s, err)
		}
	})
	t.Run("ErrNoSecret", func(t *testing.T) {
		dir := t.TempDir()
		cfg := orchestrator.Config{DBPath: filepath.Join(dir, "mapyard.db")}
		if _, err := cfg.RootSecret(); !errors.Is(err, orchestrator.ErrNoSecret) {
			t.Fatalf("err %v, want ErrNoSecret", err)
		}
		if _, err := os.Stat(filepath.Join(dir, orchestrator.SecretFileName)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("RootSecret created the secret file (stat: %v)", err)
		}
	})
}
