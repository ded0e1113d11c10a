package main

import (
	"bytes"
	"context"
	"fmt"
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

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/outbox"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/fake/faketest"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

const testSecret = "0123456789abcdef-test"

// TestMain lets tests run the real map server as a child process: the test binary
// re-executed with MAPYARD_MAP_CHILD=1 behaves exactly like the mapserver binary.
func TestMain(m *testing.M) {
	if os.Getenv("MAPYARD_MAP_CHILD") == "1" {
		os.Exit(run(nil, os.Environ(), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestRun_Help(t *testing.T) {
	var stdout bytes.Buffer
	if code := run([]string{"-h"}, nil, &stdout, io.Discard); code != 0 {
		t.Fatalf("-h exited %d", code)
	}
	for _, v := range []string{"MAP_INSTANCE_ID", "MAP_ORCH_URL", "MAP_CREDENTIAL", "MAP_ORCH_CREDENTIAL", "MAP_CONTROL_PORT_BASE", "MAP_FAULT_EXIT_AFTER_MS", "MAP_RESUME_TTL_MS"} {
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

// TestSIGTERM_ClosesPlayersPushesExitsZero runs the binary against the fake
// orchestrator, welcomes a saved character, and stops the map with SIGTERM: the player
// gets a 1001 close, the character's state reaches the orchestrator, and the process
// exits 0 (a clean stop, never counted as a crash).
func TestSIGTERM_ClosesPlayersPushesExitsZero(t *testing.T) {
	orch := faketest.MustOpenOrch(t)
	mapCred, orchCred := faketest.Credentials(t, faketest.DefaultInstance)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MAPYARD_MAP_CHILD=1",
		"MAP_ORCH_URL="+orch.HTTP.ControlURL(), "MAP_CREDENTIAL="+mapCred, "MAP_ORCH_CREDENTIAL="+orchCred,
		"MAP_INSTANCE_ID="+faketest.DefaultInstance, "MAP_MAP_ID=default", "MAP_LISTEN_HOST=127.0.0.1",
		"MAP_GAME_PORT=0", "MAP_CONTROL_PORT_BASE=0", "MAP_HEARTBEAT_MS=200", "MAP_LOG_LEVEL=debug")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("map logs:\n%s", logs.String())
		}
	})

	mc := mapcontract.NewMapClient(2 * time.Second)
	var inst orchestrator.Instance
	faketest.WaitFor(t, "the map to register and generate its world", func() bool {
		var err error
		if inst, err = orch.Maps.Instance(faketest.DefaultInstance); err != nil {
			return false
		}
		h, err := mc.Health(context.Background(), fmt.Sprintf("http://127.0.0.1:%d", inst.ControlPort), orchCred)
		return err == nil && h.WorldHash != ""
	})

	j := orch.Join(t, `{"authKey":"S1gt3rmK3yAbCdEfGhIjKlMnOp"}`)
	c, _, err := websocket.DefaultDialer.Dial(fmt.Sprintf("ws://127.0.0.1:%d/ws", inst.GamePort), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"v":1,"kind":"hello","ticket":"`+j.Ticket+`"}`)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, data, err := c.ReadMessage(); err != nil || !strings.Contains(string(data), `"kind":"welcome"`) {
		t.Fatalf("welcome: %s %v", data, err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		if _, _, err := c.ReadMessage(); err != nil {
			if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
				t.Fatalf("connection ended with %v, want close 1001", err)
			}
			break
		}
	}
	select {
	case err := <-done:
		done <- err // for the cleanup
		if err != nil {
			t.Fatalf("exit: %v, want 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the map did not exit within 15 s of SIGTERM")
	}
	if _, err := orch.DB.Snapshot(context.Background(), faketest.DefaultInstance, record.CharacterPartition(j.CharacterID)); err != nil {
		t.Fatalf("the character's state was not pushed at stop: %v", err)
	}
	if _, err := orch.DB.Snapshot(context.Background(), faketest.DefaultInstance, outbox.InstancePartition); err != nil {
		t.Fatalf("the instance partition was not pushed at stop: %v", err)
	}
}
