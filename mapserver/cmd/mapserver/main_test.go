package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/app/apptest"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/control"
)

// TestMain lets tests run the real map server as a child process: the test binary
// re-executed with MAPYARD_MAP_CHILD=1 behaves exactly like the mapserver binary.
func TestMain(m *testing.M) {
	if os.Getenv("MAPYARD_MAP_CHILD") == "1" {
		os.Exit(run(nil, os.Environ(), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestRun_HelpListsResumeTTL(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"-h"}, nil, &out, io.Discard); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	for _, v := range []string{"MAP_RESUME_TTL_MS", "10000", "MAP_TICK_HZ", "MAP_SNAPSHOT_HZ"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("help does not list %s", v)
		}
	}
}

// TestSIGTERM_ClosesPlayersPushesExitsZero runs the binary against the fake
// orchestrator, welcomes a saved character, and stops the map with SIGTERM: the player
// gets a 1001 close, the character's state reaches the orchestrator, and the process
// exits 0 (a clean stop, never counted as a crash).
func TestSIGTERM_ClosesPlayersPushesExitsZero(t *testing.T) {
	orch := apptest.MustOpenOrch(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MAPYARD_MAP_CHILD=1",
		"MAP_ORCH_URL="+orch.HTTP.ControlURL(), "MAP_INTERNAL_RPC_SECRET="+apptest.Secret,
		"MAP_INSTANCE_ID="+apptest.DefaultInstance, "MAP_MAP_ID=default", "MAP_LISTEN_HOST=127.0.0.1",
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

	mc := control.NewMapClient(apptest.Secret, 2*time.Second)
	var inst orchestrator.Instance
	apptest.WaitFor(t, "the map to register and generate its world", func() bool {
		var err error
		if inst, err = orch.Maps.Instance(apptest.DefaultInstance); err != nil {
			return false
		}
		h, err := mc.Health(context.Background(), fmt.Sprintf("http://127.0.0.1:%d", inst.ControlPort))
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
	if _, err := orch.DB.Snapshot(context.Background(), apptest.DefaultInstance, orchestrator.CharacterPartitionPrefix+j.CharacterID); err != nil {
		t.Fatalf("the character's state was not pushed at stop: %v", err)
	}
}
