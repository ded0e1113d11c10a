package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/fake"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestFakeOrchestrator_MapAlone runs a real map server process against the fake
// orchestrator, as a map developer does: the map registers, receives its MapConfig and
// generates the world the test computes too, and a dev join ticket is redeemed once.
func TestFakeOrchestrator_MapAlone(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "mapserver")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/mapyard/mapyard/mapserver/cmd/mapserver").CombinedOutput(); err != nil {
		t.Fatalf("build map server: %v\n%s", err, out)
	}
	m := &Main{
		Config: Config{RPCConfig: orchestrator.RPCConfig{PublicAddr: "127.0.0.1:0", ControlAddr: "127.0.0.1:0", DefaultInstanceID: "dev-1",
			JoinTicketTTLMS: 10000, TransferTokenTTLMS: 10000, LogLevel: "info"}},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if err := m.Run(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })

	creds, err := fake.DevCredentials(m.Root, "dev-1")
	if err != nil {
		t.Fatal(err)
	}
	mapCred, orchCred := strings.SplitN(creds[0], "=", 2)[1], strings.SplitN(creds[1], "=", 2)[1]
	mapCmd := exec.Command(bin)
	mapCmd.Env = append(append(os.Environ(), creds...),
		"MAP_ORCH_URL="+m.HTTP.ControlURL(), "MAP_INSTANCE_ID=dev-1",
		"MAP_MAP_ID=default", "MAP_LISTEN_HOST=127.0.0.1", "MAP_GAME_PORT=0", "MAP_CONTROL_PORT_BASE=0", "MAP_HEARTBEAT_MS=200")
	stderr, _ := mapCmd.StderrPipe()
	if err := mapCmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Logf("map: %s", sc.Text())
		}
	}()
	t.Cleanup(func() { mapCmd.Process.Kill(); mapCmd.Wait() })

	waitFor(t, "the map to register", func() bool {
		resp, err := http.Get(m.HTTP.PublicURL() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	t.Run("WorldFromMapConfig", func(t *testing.T) {
		cfg, _ := mapgen.Resolve("dev-1", "default", nil)
		world, err := mapgen.Generate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := m.Maps.Instance("dev-1")
		if err != nil {
			t.Fatal(err)
		}
		mc := mapcontract.NewMapClient(2 * time.Second)
		var got string
		waitFor(t, "the world hash", func() bool {
			h, err := mc.Health(context.Background(), fmt.Sprintf("http://127.0.0.1:%d", inst.ControlPort), orchCred)
			got = h.WorldHash
			return err == nil && got != ""
		})
		if got != world.Hash() {
			t.Fatalf("map world hash %s, want %s", got, world.Hash())
		}
	})
	t.Run("DevTicketRedeemedOnce", func(t *testing.T) {
		var j public.JoinResponse
		testutil.PostJSON(t, m.HTTP.PublicURL()+public.PathJoin, "", ``, http.StatusOK, &j) // no body: a disposable character
		if j.InstanceID != "dev-1" || !j.Disposable {
			t.Fatalf("join %+v", j)
		}
		body := `{"instanceId":"dev-1","token":"` + j.Ticket + `"}`
		var r mapcontract.RedeemResult
		testutil.PostJSON(t, m.HTTP.ControlURL()+mapcontract.PathRedeem, mapCred, body, http.StatusOK, &r)
		if r.CharacterID != j.CharacterID {
			t.Fatalf("redeem %+v", r)
		}
		var e httpkit.ErrorResponse
		testutil.PostJSON(t, m.HTTP.ControlURL()+mapcontract.PathRedeem, mapCred, body, http.StatusConflict, &e)
		if e.Error.Code != apierr.ETICKETUSED {
			t.Fatalf("replay: %+v", e.Error)
		}
	})
	t.Run("ErrNotImplementedWithoutDocker", func(t *testing.T) {
		var e httpkit.ErrorResponse
		testutil.PostJSON(t, m.HTTP.ControlURL()+httpapi.PathAdminMaps, m.Secret, `{"instanceId":"x-1","mapId":"frontier"}`, http.StatusNotImplemented, &e)
		if e.Error.Code != apierr.ENOTIMPLEMENTED {
			t.Fatalf("create: %+v", e.Error)
		}
	})
}

func TestRun_InvalidConfig(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(nil, []string{"ORCH_DEFAULT_INSTANCE_ID=Dev 1"}, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), "ORCH_DEFAULT_INSTANCE_ID") {
		t.Fatalf("code %d, stderr %s", code, stderr.String())
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
