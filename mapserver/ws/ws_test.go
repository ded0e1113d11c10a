package ws_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/mapgen"
	"github.com/mapyard/mapyard/mapserver/ws"
	"github.com/mapyard/mapyard/orchestrator/apierr"
	"github.com/mapyard/mapyard/orchestrator/control"
)

// fakeRedeemer admits the tickets in ok once each and refuses the rest with the codes
// in deny; it counts calls.
type fakeRedeemer struct {
	mu      sync.Mutex
	ok      map[string]string // ticket -> characterId
	deny    map[string]error
	used    map[string]bool
	calls   int
	last    control.RedeemRequest
	results []control.TransferResult
}

func (f *fakeRedeemer) TransferResult(_ context.Context, r control.TransferResult) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.results = append(f.results, r)
	return nil
}

func (f *fakeRedeemer) Redeem(_ context.Context, r control.RedeemRequest) (*control.RedeemResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.last = r
	if err, ok := f.deny[r.Token]; ok {
		return nil, err
	}
	id, ok := f.ok[r.Token]
	if !ok {
		return nil, apierr.Errorf(apierr.ETICKETINVALID, "bad signature")
	}
	if f.used[r.Token] {
		return nil, apierr.Errorf(apierr.ETICKETUSED, "ticket already used")
	}
	f.used[r.Token] = true
	if strings.HasPrefix(r.Token, "transfer") {
		return &control.RedeemResult{Kind: "transfer", TransferID: "tr-" + id, CharacterID: id, Epoch: 4}, nil
	}
	return &control.RedeemResult{Kind: "join", CharacterID: id, Epoch: 3}, nil
}

func (f *fakeRedeemer) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

type harness struct {
	srv    *ws.Server
	redeem *fakeRedeemer
	cfg    mapgen.MapConfig
	hash   string
	url    string
}

// newHarness serves a ws.Server with a generated default world on a real listener.
func newHarness(t *testing.T, tune func(*ws.Server)) *harness {
	t.Helper()
	cfg, err := mapgen.Resolve("forest-1", mapgen.DefaultMapID, nil)
	if err != nil {
		t.Fatal(err)
	}
	world := ws.NewWorld()
	world.Set(cfg, "hash-of-forest-1")
	h := &harness{cfg: cfg, hash: "hash-of-forest-1", redeem: &fakeRedeemer{
		ok: map[string]string{"good": "char-1", "good2": "char-2", "transfer-1": "char-3"}, used: map[string]bool{},
		deny: map[string]error{
			"expired": apierr.Errorf(apierr.ETICKETEXPIRED, "ticket expired"),
			"other":   apierr.Errorf(apierr.EWRONGMAP, "ticket is for another map"),
			"down":    errors.New("dial tcp: connection refused"),
		},
	}}
	h.srv = ws.NewServer(h.redeem, world, 30, 15, slog.New(slog.DiscardHandler))
	if tune != nil {
		tune(h.srv)
	}
	ts := httptest.NewServer(h.srv)
	t.Cleanup(ts.Close)
	h.url = "ws" + strings.TrimPrefix(ts.URL, "http")
	return h
}

func dial(t *testing.T, url string, header http.Header) *websocket.Conn {
	t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial(url, header)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", url, err, resp)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func send(t *testing.T, c *websocket.Conn, msg string) {
	t.Helper()
	if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// recv reads one message into a map, failing on anything but a text frame.
func recv(t *testing.T, c *websocket.Conn) map[string]any {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	typ, data, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if typ != websocket.TextMessage {
		t.Fatalf("frame type %d, want text", typ)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return m
}

// wantClose reads until the connection ends and checks the close code.
func wantClose(t *testing.T, c *websocket.Conn, code int) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, data, err := c.ReadMessage()
		if err == nil {
			t.Logf("before close: %s", data)
			continue
		}
		if !websocket.IsCloseError(err, code) {
			t.Fatalf("connection ended with %v, want close %d", err, code)
		}
		return
	}
}

func wantError(t *testing.T, m map[string]any, code string) {
	t.Helper()
	if m["kind"] != "error" || m["code"] != code || m["v"] != float64(1) {
		t.Fatalf("got %v, want error %s", m, code)
	}
	if msg, _ := m["message"].(string); msg == "" {
		t.Fatalf("error %s without a message", code)
	}
}

func hello(t *testing.T, h *harness, ticket string) *websocket.Conn {
	t.Helper()
	c := dial(t, h.url, nil)
	send(t, c, `{"v":1,"kind":"hello","ticket":"`+ticket+`"}`)
	return c
}

func TestHello_Welcome(t *testing.T) {
	h := newHarness(t, nil)
	c := hello(t, h, "good")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var w ws.Welcome
	if err := c.ReadJSON(&w); err != nil {
		t.Fatal(err)
	}
	if w.V != 1 || w.Kind != "welcome" || w.CharacterID != "char-1" || w.Epoch != 3 ||
		w.InstanceID != "forest-1" || w.MapID != mapgen.DefaultMapID || w.WorldHash != h.hash ||
		w.TickHz != 30 || w.SnapshotHz != 15 {
		t.Fatalf("welcome %+v", w)
	}
	if got, want := w.MapConfig.Seed, h.cfg.Seed; got != want || w.MapConfig.InstanceID != "forest-1" {
		t.Fatalf("welcome map config %+v, want %+v", w.MapConfig, h.cfg)
	}
	if got, want := h.redeem.last, (control.RedeemRequest{InstanceID: "forest-1", Token: "good"}); got != want {
		t.Fatalf("redeem request %+v, want %+v", got, want)
	}
	if got := h.srv.Players(); got != 1 {
		t.Fatalf("players %d, want 1", got)
	}

	t.Run("PingPong", func(t *testing.T) {
		send(t, c, `{"v":1,"kind":"ping","t":1234.5}`)
		if m := recv(t, c); m["kind"] != "pong" || m["t"] != 1234.5 || m["v"] != float64(1) {
			t.Fatalf("got %v, want pong 1234.5", m)
		}
	})
	t.Run("ErrBadRequestKeepsConnection", func(t *testing.T) {
		for _, msg := range []string{`{not json`, `{"v":1,"kind":"dance"}`, `{"v":2,"kind":"ping","t":1}`, `{"v":1,"kind":"hello","ticket":"good2"}`} {
			send(t, c, msg)
			wantError(t, recv(t, c), apierr.EBADREQUEST)
		}
		send(t, c, `{"v":1,"kind":"ping","t":7}`)
		if m := recv(t, c); m["kind"] != "pong" || m["t"] != float64(7) {
			t.Fatalf("after bad messages: %v, want pong 7", m)
		}
	})
	t.Run("ClientCloseLeaves", func(t *testing.T) {
		_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		wantClose(t, c, websocket.CloseNormalClosure)
		waitPlayers(t, h.srv, 0)
	})
}

func waitPlayers(t *testing.T, s *ws.Server, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.Players() != want {
		if time.Now().After(deadline) {
			t.Fatalf("players %d, want %d", s.Players(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHello_Denied(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct {
		name, ticket, code string
		close              int
	}{
		{"ErrTicketInvalid", "forged", apierr.ETICKETINVALID, websocket.ClosePolicyViolation},
		{"ErrTicketExpired", "expired", apierr.ETICKETEXPIRED, websocket.ClosePolicyViolation},
		{"ErrWrongMap", "other", apierr.EWRONGMAP, websocket.ClosePolicyViolation},
		{"ErrMapUnavailableWhenOrchestratorDown", "down", apierr.EMAPUNAVAILABLE, websocket.CloseTryAgainLater},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hello(t, h, tc.ticket)
			wantError(t, recv(t, c), tc.code)
			wantClose(t, c, tc.close)
		})
	}
	t.Run("ErrTicketUsed", func(t *testing.T) {
		c := hello(t, h, "good")
		if m := recv(t, c); m["kind"] != "welcome" {
			t.Fatalf("first use: %v", m)
		}
		c2 := hello(t, h, "good")
		wantError(t, recv(t, c2), apierr.ETICKETUSED)
		wantClose(t, c2, websocket.ClosePolicyViolation)
		if got := h.srv.Players(); got != 1 {
			t.Fatalf("players %d after denials, want the one welcomed", got)
		}
	})
}

func TestHello_Malformed(t *testing.T) {
	h := newHarness(t, nil)
	for _, msg := range []string{`{"v":1,"kind":"ping","t":1}`, `hello`, `{"v":1,"kind":"hello"}`, `{"v":9,"kind":"hello","ticket":"good"}`} {
		c := dial(t, h.url, nil)
		send(t, c, msg)
		wantError(t, recv(t, c), apierr.EBADREQUEST)
		wantClose(t, c, websocket.ClosePolicyViolation)
	}
	if got := h.redeem.Calls(); got != 0 {
		t.Fatalf("%d redeems for malformed hellos, want 0", got)
	}
}

func TestHello_Timeout(t *testing.T) {
	h := newHarness(t, func(s *ws.Server) { s.HelloTimeout = 100 * time.Millisecond })
	c := dial(t, h.url, nil)
	wantError(t, recv(t, c), apierr.EBADREQUEST)
	wantClose(t, c, websocket.ClosePolicyViolation)
}

func TestHello_WorldNotGenerated(t *testing.T) {
	red := &fakeRedeemer{ok: map[string]string{"good": "char-1"}, used: map[string]bool{}}
	s := ws.NewServer(red, ws.NewWorld(), 30, 15, slog.New(slog.DiscardHandler))
	s.WorldWait = 50 * time.Millisecond
	ts := httptest.NewServer(s)
	defer ts.Close()
	c := dial(t, "ws"+strings.TrimPrefix(ts.URL, "http"), nil)
	send(t, c, `{"v":1,"kind":"hello","ticket":"good"}`)
	wantError(t, recv(t, c), apierr.EMAPUNAVAILABLE)
	wantClose(t, c, websocket.CloseTryAgainLater)
	if red.Calls() != 0 {
		t.Fatal("ticket redeemed on a map without a world")
	}
}

func TestReadLimit_Closes1009(t *testing.T) {
	h := newHarness(t, nil)
	c := hello(t, h, "good")
	recv(t, c)
	send(t, c, `{"v":1,"kind":"ping","t":1,"pad":"`+strings.Repeat("x", ws.DefaultReadLimit)+`"}`)
	wantClose(t, c, websocket.CloseMessageTooBig)
	waitPlayers(t, h.srv, 0)
}

func TestIdleTimeout_Closes(t *testing.T) {
	h := newHarness(t, func(s *ws.Server) { s.IdleTimeout = 150 * time.Millisecond })
	c := hello(t, h, "good")
	recv(t, c)
	wantClose(t, c, websocket.CloseNormalClosure)
	waitPlayers(t, h.srv, 0)
}

// TestSlowClient_Dropped checks that a client that never reads is dropped once its
// queue fills, while Broadcast never blocks and other players keep being served.
func TestSlowClient_Dropped(t *testing.T) {
	h := newHarness(t, func(s *ws.Server) { s.SendQueue = 4 })
	slow := hello(t, h, "good")
	fast := hello(t, h, "good2")
	recv(t, fast)
	waitPlayers(t, h.srv, 2)
	_ = slow // never read again

	frame := []byte(`{"v":1,"kind":"event","pad":"` + strings.Repeat("x", 64<<10) + `"}`)
	deadline := time.Now().Add(20 * time.Second)
	for h.srv.Players() == 2 {
		if time.Now().After(deadline) {
			t.Fatal("slow client never dropped")
		}
		h.srv.Broadcast(frame)
		// The fast client keeps up.
		_ = fast.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, _, err := fast.ReadMessage(); err != nil {
			t.Fatalf("fast client: %v", err)
		}
	}
	if got := h.srv.Players(); got != 1 {
		t.Fatalf("players %d, want the fast one", got)
	}
	send(t, fast, `{"v":1,"kind":"ping","t":9}`)
	for {
		if m := recv(t, fast); m["kind"] == "pong" {
			break
		}
	}
}

func TestOrigin(t *testing.T) {
	h := newHarness(t, func(s *ws.Server) { s.AllowedOrigins = ws.ParseOrigins(" https://Play.example.com/ ,") })
	host := strings.TrimPrefix(h.url, "ws://")
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{"", true},
		{"http://" + host, true},
		{"https://play.example.com", true},
		{"https://evil.example.com", false},
		{"null", false},
	} {
		header := http.Header{}
		if tc.origin != "" {
			header.Set("Origin", tc.origin)
		}
		c, resp, err := websocket.DefaultDialer.Dial(h.url, header)
		if tc.ok {
			if err != nil {
				t.Errorf("origin %q refused: %v", tc.origin, err)
				continue
			}
			c.Close()
		} else if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("origin %q: err %v, want 403", tc.origin, err)
			if c != nil {
				c.Close()
			}
		}
	}
}

// TestTransferArrivalReported checks that a player arriving with a transfer token is
// welcomed with the transfer's id and that the map reports the transfer's success.
func TestTransferArrivalReported(t *testing.T) {
	h := newHarness(t, nil)
	c := dial(t, h.url, nil)
	send(t, c, `{"v":1,"kind":"hello","ticket":"transfer-1"}`)
	w := recv(t, c)
	if w["kind"] != "welcome" || w["transferId"] != "tr-char-3" {
		t.Fatalf("welcome %v", w)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.redeem.mu.Lock()
		results := append([]control.TransferResult(nil), h.redeem.results...)
		h.redeem.mu.Unlock()
		if len(results) == 1 {
			if r := results[0]; r.TransferID != "tr-char-3" || r.InstanceID != "forest-1" || !r.Success {
				t.Fatalf("transfer result %+v", r)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("transfer results %+v, want one success", results)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
