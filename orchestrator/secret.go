package orchestrator

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// SecretFileName is the file, beside the database, that keeps a generated secret so that
// running maps and later orchestrators agree on it.
const SecretFileName = "internal-rpc-secret"

// PreviousSecretFileName is where an operator rotating the root secret moves the old
// one (see docs/security.md): the orchestrator then re-keys each saved character's
// authKey hash when its player next joins.
const PreviousSecretFileName = SecretFileName + ".previous"

// LoadPreviousSecret returns the secret kept in dir under PreviousSecretFileName, or ""
// when there is none.
func LoadPreviousSecret(dir string) (string, error) {
	buf, err := os.ReadFile(filepath.Join(dir, PreviousSecretFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("read previous secret: %w", err)
	}
	return strings.TrimSpace(string(buf)), nil
}

// ErrNoSecret means that there is no root secret yet: ORCH_INTERNAL_RPC_SECRET is empty
// and the orchestrator has not generated one (it does on its first start).
var ErrNoSecret = errors.New("no root secret")

// DataDir is the directory of the database, where the orchestrator keeps the root
// secret it generated and the credential files it writes.
func (c *Config) DataDir() string { return filepath.Dir(c.DBPath) }

// RootSecret returns the root secret of the orchestrator c configures, read as that
// orchestrator reads it: ORCH_INTERNAL_RPC_SECRET when set, else the secret kept in
// DataDir. It never creates one, so that a client of the running orchestrator
// (`orchestrator admin`) uses the orchestrator's or fails with ErrNoSecret.
func (c *Config) RootSecret() (string, error) {
	return c.rootSecret(func(dir string) (string, error) {
		s, err := readSecret(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%w: ORCH_INTERNAL_RPC_SECRET is empty and %s does not exist (the orchestrator generates it on its first start)",
				ErrNoSecret, filepath.Join(dir, SecretFileName))
		}
		return s, err
	})
}

// LoadOrCreateRootSecret is RootSecret for the orchestrator itself: on its first start,
// with ORCH_INTERNAL_RPC_SECRET empty, it generates the secret and keeps it in DataDir
// (LoadOrCreateSecret).
func (c *Config) LoadOrCreateRootSecret() (string, error) {
	return c.rootSecret(LoadOrCreateSecret)
}

// rootSecret is the one rule of where the root secret comes from: the variable, else
// what load finds in the data dir.
func (c *Config) rootSecret(load func(dir string) (string, error)) (string, error) {
	if c.Secret != "" {
		return c.Secret, nil
	}
	return load(c.DataDir())
}

// readSecret returns the secret kept in dir; an error wrapping fs.ErrNotExist when
// there is none.
func readSecret(dir string) (string, error) {
	path := filepath.Join(dir, SecretFileName)
	buf, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read secret: %w", err)
	}
	s := strings.TrimSpace(string(buf))
	if len(s) < 16 {
		return "", fmt.Errorf("secret file %q: too short", path)
	}
	return s, nil
}

// LoadOrCreateSecret returns the secret kept in dir, creating a new random one (256 bits,
// file mode 0600) the first time. A concurrent first start cannot produce two secrets:
// the file is created exclusively and the loser reads the winner's.
func LoadOrCreateSecret(dir string) (string, error) {
	if s, err := readSecret(dir); !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}

	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate secret: %w", err)
	}
	s := base64.RawURLEncoding.EncodeToString(b)
	f, err := os.OpenFile(filepath.Join(dir, SecretFileName), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadOrCreateSecret(dir)
	} else if err != nil {
		return "", fmt.Errorf("create secret: %w", err)
	}
	if _, err := f.WriteString(s + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("write secret: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("sync secret: %w", err)
	}
	return s, f.Close()
}

// WriteFileAtomic replaces path with data (mode 0600) so that a reader never sees a
// partial file: the orchestrator writes the edge's credential with it, which the edge
// may be reading at that moment.
func WriteFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
