package app_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/app"
)

// TestIdentity checks that a warm-pool map's log lines name its pool id until the
// orchestrator names its instance, and the instance (never the pool id) from then on,
// including on loggers derived before the handout.
func TestIdentity(t *testing.T) {
	var buf bytes.Buffer
	id := app.NewIdentity("dev-1", "default", "pool-ab12")
	log := slog.New(id.Handler(slog.NewTextHandler(&buf, nil))).With("part", "loop")
	log.Info("blank")
	id.Set("forest-1", "forest")
	log.Info("running")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines %q", lines)
	}
	if !strings.Contains(lines[0], "pool=pool-ab12") || strings.Contains(lines[0], "instance=") {
		t.Errorf("blank line %q", lines[0])
	}
	if !strings.Contains(lines[1], "instance=forest-1 map=forest") || strings.Contains(lines[1], "pool") || !strings.Contains(lines[1], "part=loop") {
		t.Errorf("running line %q", lines[1])
	}
}
