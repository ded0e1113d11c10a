package orchestrator

import (
	"fmt"
	"os"
	"path/filepath"
)

// MetricsCredentialFileName is the file, beside the database, where the orchestrator
// writes the metrics credential at every start (keys.Root.MetricsCredential): the
// bearer token Prometheus presents to scrape the orchestrator and, through it, the maps
// (docs/observability.md).
const MetricsCredentialFileName = "metrics-credential"

// WriteCredentialFile writes value to the file name in dir (mode 0600), replacing it
// atomically, so a reader never sees half a credential.
func WriteCredentialFile(dir, name, value string) error {
	tmp, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := tmp.WriteString(value + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
