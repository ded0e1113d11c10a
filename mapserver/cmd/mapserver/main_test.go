package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mapyard/mapyard/orchestrator/testutil"
)

const testSecret = "0123456789abcdef-test"

func TestRun_Help(t *testing.T) {
	var stdout bytes.Buffer
	if code := run([]string{"-h"}, nil, &stdout, io.Discard); code != 0 {
		t.Fatalf("-h exited %d", code)
	}
	for _, v := range []string{"MAP_INSTANCE_ID", "MAP_ORCH_URL", "MAP_CREDENTIAL", "MAP_ORCH_CREDENTIAL", "MAP_CONTROL_PORT_BASE", "MAP_FAULT_EXIT_AFTER_MS"} {
		if !strings.Contains(stdout.String(), v) {
			t.Errorf("-h does not list %s:\n%s", v, stdout.String())
		}
	}
}

func TestRun_InvalidConfig(t *testing.T) {
	for name, env := range map[string][]string{
		"NoSecret":     nil,
		"BadInstance":  {"MAP_CREDENTIAL=" + testSecret, "MAP_ORCH_CREDENTIAL=" + testSecret, "MAP_INSTANCE_ID=Dev 1"},
		"SnapshotRate": {"MAP_CREDENTIAL=" + testSecret, "MAP_ORCH_CREDENTIAL=" + testSecret, "MAP_TICK_HZ=10", "MAP_SNAPSHOT_HZ=20"},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(nil, env, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), "MAP_") {
				t.Fatalf("exit %d, stderr %q; want 2 naming the variable", code, stderr.String())
			}
		})
	}
}

// TestHealthcheck starts the built map server against a stand-in orchestrator and
// checks that `mapserver healthcheck` fails before it listens and passes once it does,
// and that SIGTERM stops it cleanly.
func TestHealthcheck(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "mapserver")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	orch := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"registered":true}`)
	}))
	t.Cleanup(orch.Close)
	env := []string{
		"MAP_CREDENTIAL=" + testSecret, "MAP_ORCH_CREDENTIAL=" + testSecret, "MAP_ORCH_URL=" + orch.URL, "MAP_LISTEN_HOST=127.0.0.1",
		"MAP_GAME_PORT=0", "MAP_CONTROL_PORT_BASE=" + strconv.Itoa(testutil.FreePort(t)), "MAP_HEARTBEAT_MS=200",
	}
	if code := run([]string{"healthcheck"}, env, io.Discard, io.Discard); code != 1 {
		t.Fatalf("healthcheck with no server exited %d, want 1", code)
	}

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	stop := func() { cmd.Process.Kill(); <-exited }
	t.Cleanup(stop)

	deadline := time.Now().Add(20 * time.Second)
	for run([]string{"healthcheck"}, env, io.Discard, io.Discard) != 0 {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("healthcheck never passed; server log:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("server exited with %v after SIGTERM; log:\n%s", waitErr, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("server still running 20 s after SIGTERM")
	}
}
