package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mapyard/mapyard/orchestrator/fake/faketest"
)

// TestGamePanics_MapExitsNonZero: a game that panics in a tick (the fault injection's,
// MAP_FAULT_PANIC_AT_TICK) takes its map server down with a non-zero status, the panic
// and its stack in the log, within moments: never a hung tick behind heartbeats that
// go on. The orchestrator restarts an exited map like any crash
// (TestSupervisor_GamePanicRestarted, orchestrator/docker).
func TestGamePanics_MapExitsNonZero(t *testing.T) {
	orch := faketest.MustOpenOrch(t)
	mapCred, orchCred := faketest.Credentials(t, faketest.DefaultInstance)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MAPYARD_MAP_CHILD=1", "MAP_FAULT_PANIC_AT_TICK=10",
		"MAP_ORCH_URL="+orch.HTTP.ControlURL(), "MAP_CREDENTIAL="+mapCred, "MAP_ORCH_CREDENTIAL="+orchCred,
		"MAP_INSTANCE_ID="+faketest.DefaultInstance, "MAP_MAP_ID=default", "MAP_LISTEN_HOST=127.0.0.1",
		"MAP_GAME_PORT=0", "MAP_CONTROL_PORT_BASE=0", "MAP_HEARTBEAT_MS=200")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Fatalf("exit %v, want a non-zero status\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the map still runs 30 s after its game panicked\n%s", logs.String())
	}
	for _, want := range []string{"the tick panicked", "the game panics at tick 10", "faulty"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("the log lacks %q:\n%s", want, logs.String())
		}
	}
}
