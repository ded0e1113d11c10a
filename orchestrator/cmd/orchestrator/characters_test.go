package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestEdge_Characters runs the character API's flows as a browser on the edge's origin
// would: through the edge in front of the real orchestrator (a child process with its
// SQLite file) and a real map container, each join entered over the map's WebSocket.
// Then the operator's view lists the character in play, and no raw authKey used is
// found in the orchestrator's or the edge's logs, the database file and its WAL, or
// either process's metrics.
func TestEdge_Characters(t *testing.T) {
	cli := dockertest.Client(t)
	deployment := "test-" + randomHex(t, 4)
	t.Cleanup(func() { _ = cli.NetworkRemove(context.Background(), deployment) })
	t.Cleanup(func() { dockertest.RemoveDeployment(t, cli, deployment) })
	secret := randomHex(t, 16)
	dbPath := filepath.Join(t.TempDir(), "mapyard.db")
	const max = 4
	orch := startOrchestrator(t, childEnv(deployment, "127.0.0.1:0", dbPath, secret,
		"ORCH_MAP_NETWORK="+deployment,
		"ORCH_DEFAULT_INSTANCE_ID="+deployment+"-d",
		"ORCH_WARM_POOL_SIZE=0",
		"ORCH_MAX_CHARACTERS_PER_KEY=4",
		"ORCH_LOG_LEVEL=debug",
		"MAP_HEARTBEAT_MS=500",
	))
	waitStatus(t, orch.public+"/readyz", http.StatusOK, 60*time.Second)
	edgeLogs := &lockedBuffer{}
	e := openEdgeLog(t, orch.control, orch.edgeCredential, slog.New(slog.NewJSONHandler(edgeLogs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	base := "ws" + strings.TrimPrefix(e.PublicURL(), "http")

	var bobID string
	keys := testutil.CharacterFlows(t, testutil.CharacterAPI{Base: e.PublicURL()}, max, func(t *testing.T, j public.JoinResponse) string {
		c := dialWS(t, base+j.WS)
		sendWS(t, c, `{"v":1,"kind":"hello","ticket":"`+j.Ticket+`"}`)
		var w struct{ Kind, CharacterID, InstanceID string }
		readWS(t, c, &w)
		if w.Kind != "welcome" || w.InstanceID != j.InstanceID {
			t.Fatalf("welcome %+v for join %+v", w, j)
		}
		bobID = w.CharacterID
		return w.CharacterID
	})

	t.Run("AdminSessionsShowsTheCharacterInPlay", func(t *testing.T) {
		var got struct{ Sessions []orchestrator.Session }
		testutil.GetJSON(t, orch.control+httpapi.PathAdminSessions, secret, http.StatusOK, &got)
		found := false
		for _, s := range got.Sessions {
			if s.CharacterID == bobID {
				found = s.InstanceID == deployment+"-d" && s.State == orchestrator.SessionActive && s.Name == "Bob"
			}
		}
		if !found {
			t.Fatalf("sessions %+v lack %s active in the default map", got.Sessions, bobID)
		}
		var res orchestrator.CleanupResult
		testutil.PostJSON(t, orch.control+httpapi.PathAdminCleanup, secret, nil, http.StatusOK, &res)
	})

	t.Run("RawKeyNeverStored", func(t *testing.T) {
		places := map[string]string{"orchestrator log": orch.logs.String(), "edge log": edgeLogs.String()}
		if !strings.Contains(places["orchestrator log"], "character created") {
			t.Fatal("the orchestrator's log captured nothing: the check would prove nothing")
		}
		places["orchestrator metrics"] = string(testutil.GetJSON(t, orch.control+httpkit.PathMetrics, secret, http.StatusOK, nil))
		resp, err := http.Get(e.MetricsURL() + httpkit.PathMetrics)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		places["edge metrics"] = string(b)
		for _, f := range []string{dbPath, dbPath + "-wal"} {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			places[f] = string(b)
		}
		for _, key := range keys {
			for where, content := range places {
				if strings.Contains(content, key) {
					t.Errorf("a raw authKey appears in the %s", where)
				}
			}
		}
	})
}
