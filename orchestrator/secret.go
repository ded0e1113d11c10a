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

// LoadOrCreateSecret returns the secret kept in dir, creating a new random one (256 bits,
// file mode 0600) the first time. A concurrent first start cannot produce two secrets:
// the file is created exclusively and the loser reads the winner's.
func LoadOrCreateSecret(dir string) (string, error) {
	path := filepath.Join(dir, SecretFileName)
	if buf, err := os.ReadFile(path); err == nil {
		s := strings.TrimSpace(string(buf))
		if len(s) < 16 {
			return "", fmt.Errorf("secret file %q: too short", path)
		}
		return s, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read secret: %w", err)
	}

	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate secret: %w", err)
	}
	s := base64.RawURLEncoding.EncodeToString(b)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
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
