package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/apierr"
	"github.com/mapyard/mapyard/orchestrator/control"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// edgeMaps is a hand-written fake supervisor holding fixed instances.
type edgeMaps struct {
	orchestrator.Maps
	inst map[string]orchestrator.Instance
}

func (m edgeMaps) Instance(id string) (orchestrator.Instance, error) {
	inst, ok := m.inst[id]
	if !ok {
		return orchestrator.Instance{}, apierr.Errorf(apierr.ENOTFOUND, "no %q", id)
	}
	return inst, nil
}
func (m edgeMaps) Ready() bool { return true }

// Gate answers from the instance's state the way the supervisor's gate does.
func (m edgeMaps) Gate(id string) (orchestrator.Instance, error) {
	inst, ok := m.inst[id]
	switch {
	case !ok:
		return inst, apierr.Errorf(apierr.EMAPUNAVAILABLE, "no %q", id)
	case inst.State == orchestrator.StateQuarantined:
		return inst, apierr.Errorf(apierr.EMAPQUARANTINED, "%q is quarantined", id)
	case inst.State != orchestrator.StateReady:
		return inst, apierr.Errorf(apierr.EMAPUNAVAILABLE, "%q is %s", id, inst.State)
	}
	return inst, nil
}

// MustOpenEdge serves the public listener over maps, without admission or store.
func MustOpenEdge(tb testing.TB, maps orchestrator.Maps) *httpapi.Server {
	tb.Helper()
	s := httpapi.NewServer(maps, nil, nil, testutil.Root(tb, secret), slog.New(slog.DiscardHandler))
	s.PublicAddr, s.ControlAddr = "127.0.0.1:0", "127.0.0.1:0"
	if err := s.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// portOf returns the port of an httptest server.
func portOf(tb testing.TB, ts *httptest.Server) int {
	tb.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	return port
}

// echoBackend is a tiny map game listener: it first reports the request it got as
// the map sees it, then echoes every message.
func echoBackend(tb testing.TB) *httptest.Server {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.WriteJSON(map[string]string{"path": r.URL.Path, "host": r.Host, "origin": r.Header.Get("Origin"),
			"query": r.URL.RawQuery, "xff": r.Header.Get("X-Forwarded-For")})
		for {
			typ, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(typ, data); err != nil {
				return
			}
		}
	}))
	tb.Cleanup(ts.Close)
	return ts
}

func TestEdge_ProxiesToMapGamePort(t *testing.T) {
	backend := echoBackend(t)
	s := MustOpenEdge(t, edgeMaps{inst: map[string]orchestrator.Instance{
		"forest-1": {ID: "forest-1", State: orchestrator.StateReady, GamePort: portOf(t, backend)},
	}})
	public := strings.TrimPrefix(s.PublicURL(), "http://")
	origin := "http://" + public
	c, _, err := websocket.DefaultDialer.Dial("ws://"+public+orchestrator.WSPath("forest-1")+"?x=1", http.Header{"Origin": {origin}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var seen map[string]string
	if err := c.ReadJSON(&seen); err != nil {
		t.Fatal(err)
	}
	if seen["path"] != "/ws" || seen["host"] != public || seen["origin"] != origin || seen["query"] != "" || seen["xff"] != "127.0.0.1" {
		t.Fatalf("map saw %v", seen)
	}
	for _, msg := range []string{`{"v":1,"kind":"ping","t":1}`, strings.Repeat("y", 3000)} {
		if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		if _, got, err := c.ReadMessage(); err != nil || string(got) != msg {
			t.Fatalf("echo %q, %v; want %q", got, err, msg)
		}
	}
}

func TestEdge_Refusals(t *testing.T) {
	// A port that was open and is now closed: a ready map whose server died.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadPort := portOf(t, dead)
	dead.Close()
	s := MustOpenEdge(t, edgeMaps{inst: map[string]orchestrator.Instance{
		"quarantined-1": {ID: "quarantined-1", State: orchestrator.StateQuarantined, GamePort: 1},
		"starting-1":    {ID: "starting-1", State: orchestrator.StateStarting},
		"gone-1":        {ID: "gone-1", State: orchestrator.StateReady, GamePort: deadPort},
	}})
	public := strings.TrimPrefix(s.PublicURL(), "http://")
	for _, tc := range []struct{ name, id, code string }{
		{"ErrMapUnavailableUnknown", "nowhere-1", apierr.EMAPUNAVAILABLE},
		{"ErrMapQuarantined", "quarantined-1", apierr.EMAPQUARANTINED},
		{"ErrMapUnavailableStarting", "starting-1", apierr.EMAPUNAVAILABLE},
		{"ErrMapUnavailableNoAnswer", "gone-1", apierr.EMAPUNAVAILABLE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, resp, err := websocket.DefaultDialer.Dial("ws://"+public+orchestrator.WSPath(tc.id), nil)
			if err == nil {
				c.Close()
				t.Fatal("upgraded")
			}
			if resp == nil {
				t.Fatalf("no HTTP answer: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			var e control.ErrorResponse
			if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil || e.Error.Code != tc.code {
				t.Fatalf("status %d body %s, want 503 %s", resp.StatusCode, body, tc.code)
			}
			if strings.Contains(string(body), strconv.Itoa(deadPort)) {
				t.Fatalf("answer %s leaks the map's port", body)
			}
		})
	}
}
