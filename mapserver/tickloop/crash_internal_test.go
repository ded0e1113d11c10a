package tickloop

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestCrash_LogsAndPanicsAgain: a panic in the tick (a game's Step, say) is logged with
// its stack and raised again, never swallowed: the process exits non-zero and the
// orchestrator restarts the map, rather than a tick that stopped while heartbeats go on.
func TestCrash_LogsAndPanicsAgain(t *testing.T) {
	var logs bytes.Buffer
	l := &Loop{Log: slog.New(slog.NewJSONHandler(&logs, nil))}
	defer func() {
		if v := recover(); v != "game over" {
			t.Fatalf("recovered %v, want the game's panic raised again", v)
		}
		for _, want := range []string{"the tick panicked", "game over", "TestCrash_LogsAndPanicsAgain"} {
			if !strings.Contains(logs.String(), want) {
				t.Fatalf("log %s lacks %q", logs.String(), want)
			}
		}
	}()
	func() {
		defer l.crash()
		panic("game over")
	}()
	t.Fatal("the panic was swallowed")
}
