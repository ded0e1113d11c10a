package conform

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/keys"
)

// TestOpenLife_FailsWithoutPanic: an orchestrator life that cannot open (here, the tap
// cannot listen on a gateway that is no address of this machine, as in a container
// without --network host) closes what it opened and says why and what to do; it used
// to close a nil life and panic.
func TestOpenLife_FailsWithoutPanic(t *testing.T) {
	root, err := keys.NewRoot(randomHex(24))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	s := &orchestratorSetup{
		dbPath: filepath.Join(t.TempDir(), "mapyard.db"), root: root, tap: newTap(log), log: log,
		gateway:   "192.0.2.1", // TEST-NET-1: never an address of this machine
		defaultID: "conform-a", defaultMap: "conform", defaultConfig: []byte(`{}`),
		options: Options{Image: "example/map:1"}.withDefaults(),
	}
	l, err := s.openLife(context.Background())
	if err == nil {
		s.closeLife(l)
		t.Fatal("a life opened with a tap on a foreign address")
	}
	if l != nil || !strings.Contains(err.Error(), "--network host") {
		t.Fatalf("openLife = %v, %v; want no life and an error that says to use --network host", l, err)
	}
}
