package ws_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapenv"
	"github.com/mapyard/mapyard/mapserver/wire"
	"github.com/mapyard/mapyard/mapserver/ws"
)

// fakeGame admits a first message "good" (answering "welcome") and refuses anything
// else with an error frame and 1008; an admitted session echoes every message back
// (answering "ping" with a "pong" Reply) and remembers its peer so tests can send from
// outside, as the tick does.
type fakeGame struct {
	// gate, when set, holds every Hello until it is closed (a slow ticket redemption).
	gate chan struct{}

	mu      sync.Mutex
	peers   []mapserver.Peer
	closed  int
	replied int
}

func (g *fakeGame) Hello(_ context.Context, first []byte, binary bool, p mapserver.Peer) mapserver.Session {
	if g.gate != nil {
		<-g.gate
	}
	if binary || string(first) != "good" {
		p.Send(wire.ErrorFrame("bad_request", "expected good", 0), false)
		p.Close(mapserver.ClosePolicy, "bad hello")
		return nil
	}
	g.mu.Lock()
	g.peers = append(g.peers, p)
	g.mu.Unlock()
	p.Send([]byte(`{"kind":"welcome"}`), false)
	return &fakeSession{g: g, p: p}
}

func (g *fakeGame) Peers() []mapserver.Peer {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]mapserver.Peer(nil), g.peers...)
}

func (g *fakeGame) Closed() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

type fakeSession struct {
	g *fakeGame
	p mapserver.Peer
}

func (s *fakeSession) Receive(data []byte, binary bool) {
	if string(data) == "ping" {
		s.p.Reply([]byte("pong"))
		s.g.mu.Lock()
		s.g.replied++
		s.g.mu.Unlock()
		return
	}
	// data is only valid during Receive: the echo is a copy.
	s.p.Send(append([]byte(nil), data...), binary)
}

func (g *fakeGame) Replied() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.replied
}

func (s *fakeSession) Closed() {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	s.g.closed++
}

type harness struct {
	srv  *ws.Server
	game *fakeGame
	url  string
}

func newHarness(t testing.TB, tune func(*ws.Server)) *harness {
	t.Helper()
	h := &harness{game: &fakeGame{}}
	h.srv = ws.NewServer(h.game, nil)
	if tune != nil {
		tune(h.srv)
	}
	ts := httptest.NewServer(h.srv)
	t.Cleanup(ts.Close)
	h.url = "ws" + strings.TrimPrefix(ts.URL, "http")
	return h
}

func dial(t testing.TB, url string, header http.Header) *websocket.Conn {
	t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial(url, header)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", url, err, resp)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func send(t testing.TB, c *websocket.Conn, msg string) {
	t.Helper()
	if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

func recv(t testing.TB, c *websocket.Conn) (int, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	typ, data, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return typ, string(data)
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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func welcomed(t testing.TB, h *harness) *websocket.Conn {
	t.Helper()
	c := dial(t, h.url, nil)
	send(t, c, "good")
	if _, m := recv(t, c); m != `{"kind":"welcome"}` {
		t.Fatalf("got %s, want the welcome", m)
	}
	return c
}

func TestSession_FramesBothWays(t *testing.T) {
	h := newHarness(t, nil)
	c := welcomed(t, h)
	send(t, c, "text")
	if typ, m := recv(t, c); typ != websocket.TextMessage || m != "text" {
		t.Fatalf("got %d %q", typ, m)
	}
	if err := c.WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if typ, m := recv(t, c); typ != websocket.BinaryMessage || m != "\x01\x02\x03" {
		t.Fatalf("got %d %q", typ, m)
	}
	t.Run("ClientCloseEndsSession", func(t *testing.T) {
		_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		wantClose(t, c, websocket.CloseNormalClosure)
		waitFor(t, "Closed", func() bool { return h.game.Closed() == 1 })
	})
}

func TestHello_RefusedByHandshaker(t *testing.T) {
	h := newHarness(t, nil)
	c := dial(t, h.url, nil)
	send(t, c, "bad")
	var e wire.ErrorEnvelope
	_, m := recv(t, c)
	if err := json.Unmarshal([]byte(m), &e); err != nil || e.Code != "bad_request" {
		t.Fatalf("got %s, want error bad_request", m)
	}
	wantClose(t, c, websocket.ClosePolicyViolation)
	if h.game.Closed() != 0 {
		t.Fatal("a refused connection had a session")
	}
}

func TestHello_Timeout(t *testing.T) {
	h := newHarness(t, func(s *ws.Server) { s.HelloTimeout = 100 * time.Millisecond })
	c := dial(t, h.url, nil)
	if _, m := recv(t, c); !strings.Contains(m, `"code":"bad_request"`) {
		t.Fatalf("got %s, want error bad_request", m)
	}
	wantClose(t, c, websocket.ClosePolicyViolation)
}

// TestClose_FromGame checks that the game's Close (a 1001 at shutdown, a transfer) ends
// the connection after the frames queued before it, and the session learns it ended.
func TestClose_FromGame(t *testing.T) {
	h := newHarness(t, nil)
	c := welcomed(t, h)
	p := h.game.Peers()[0]
	p.Send([]byte("last words"), false)
	p.Close(mapserver.CloseGoingAway, "map stopping")
	if _, m := recv(t, c); m != "last words" {
		t.Fatalf("got %q before the close", m)
	}
	wantClose(t, c, websocket.CloseGoingAway)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Drain(ctx); err != nil || h.srv.Active() != 0 {
		t.Fatalf("drain: %v, %d connections left", err, h.srv.Active())
	}
	if h.game.Closed() != 1 {
		t.Fatal("the session did not learn the connection ended")
	}
}

func TestReadLimit_Closes1009(t *testing.T) {
	h := newHarness(t, nil)
	c := welcomed(t, h)
	send(t, c, strings.Repeat("x", ws.DefaultReadLimit+1))
	wantClose(t, c, websocket.CloseMessageTooBig)
	waitFor(t, "Closed", func() bool { return h.game.Closed() == 1 })
}

func TestIdleTimeout_Closes(t *testing.T) {
	h := newHarness(t, func(s *ws.Server) { s.IdleTimeout = 150 * time.Millisecond })
	c := welcomed(t, h)
	wantClose(t, c, websocket.CloseNormalClosure)
	waitFor(t, "Closed", func() bool { return h.game.Closed() == 1 })
}

// TestSlowClient_Dropped checks that a client that never reads is dropped once its
// queue fills, while Send never blocks and another client keeps being served.
func TestSlowClient_Dropped(t *testing.T) {
	h := newHarness(t, func(s *ws.Server) { s.SendQueue = 4 })
	welcomed(t, h) // the slow one: never read again
	fast := welcomed(t, h)
	peers := h.game.Peers()
	slow, fastPeer := peers[0], peers[1]

	frame := []byte(strings.Repeat("x", 64<<10))
	deadline := time.Now().Add(20 * time.Second)
	for slow.Send(frame, true) {
		if time.Now().After(deadline) {
			t.Fatal("slow client never dropped")
		}
		if !fastPeer.Send(frame, true) {
			t.Fatal("fast client dropped")
		}
		if _, m := recv(t, fast); len(m) != len(frame) {
			t.Fatalf("fast client got %d bytes", len(m))
		}
	}
	waitFor(t, "the slow session to end", func() bool { return h.game.Closed() == 1 })
	send(t, fast, "still here")
	if _, m := recv(t, fast); m != "still here" {
		t.Fatalf("fast client got %q", m)
	}
}

// TestSlowClient_CaughtUp: a client that stops reading for a moment has its backlog
// written with blocking writes bounded by the write timeout; once it read it all and
// that timeout has passed, frames still reach it.
func TestSlowClient_CaughtUp(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	h := newHarness(t, func(s *ws.Server) { s.SendQueue, s.WriteTimeout = 256, writeTimeout })
	c := welcomed(t, h)
	p := h.game.Peers()[0]
	frame := []byte(strings.Repeat("x", 64<<10))
	for range 200 { // 12.5 MiB, more than the sockets hold
		if !p.Send(frame, true) {
			t.Fatal("client dropped")
		}
	}
	for range 200 {
		if _, m := recv(t, c); len(m) != len(frame) {
			t.Fatalf("got %d bytes", len(m))
		}
	}
	time.Sleep(writeTimeout + 100*time.Millisecond)
	p.Send([]byte("after"), true)
	if _, m := recv(t, c); m != "after" {
		t.Fatalf("after the write timeout got %q", m)
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
		} else if code := errorCode(t, resp); code != apierr.EFORBIDDEN {
			// The edge passes a map's refusal on by this code.
			t.Errorf("origin %q: refused with code %q, want %q", tc.origin, code, apierr.EFORBIDDEN)
		}
	}
}

// TestUpgradeRefusedWithEnvelope checks that a request that is no WebSocket upgrade is
// answered with the error envelope, whose code the edge passes on.
func TestUpgradeRefusedWithEnvelope(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct {
		name, method string
		status       int
		code         string
	}{
		{"ErrBadRequest", http.MethodGet, http.StatusBadRequest, apierr.EBADREQUEST},
		{"ErrMethodNotAllowed", http.MethodPost, http.StatusMethodNotAllowed, apierr.EMETHODNOTALLOWED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, "http"+strings.TrimPrefix(h.url, "ws"), nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if got := errorCode(t, resp); resp.StatusCode != tc.status || got != tc.code {
				t.Fatalf("answer %d %q, want %d %q", resp.StatusCode, got, tc.status, tc.code)
			}
		})
	}
}

// errorCode reads resp's error envelope and returns its code ("" without one).
func errorCode(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var e httpkit.ErrorResponse
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		return ""
	}
	return e.Error.Code
}

// TestLimits_FlooderRefusedThenClosed floods a connection over its message rate: the
// first burst reaches the session, the rest is refused with rate_limited and never
// reaches it, and the flooder is closed with 1008, counted by reason.
func TestLimits_FlooderRefusedThenClosed(t *testing.T) {
	metrics := ws.NewMetrics(nil)
	h := newHarness(t, func(s *ws.Server) {
		s.Limits = ws.Limits{MsgRate: 1, MsgBurst: 10}
		s.Metrics = metrics
	})
	c := welcomed(t, h)
	for i := 0; i < 200; i++ {
		if err := c.WriteMessage(websocket.TextMessage, []byte("flood")); err != nil {
			break // closed
		}
	}
	echoed, refused := 0, 0
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
				t.Fatalf("connection ended with %v, want close 1008", err)
			}
			break
		}
		switch m := string(data); {
		case m == "flood":
			echoed++
		case strings.Contains(m, `"code":"rate_limited"`):
			refused++
		default:
			t.Fatalf("unexpected %s", m)
		}
	}
	if echoed < 10 || echoed > 12 || refused == 0 {
		t.Fatalf("%d messages passed (want the burst of 10 and at most a refill), %d refusals answered", echoed, refused)
	}
	if got := testutil.ToFloat64(metrics.RateLimited.WithLabelValues(ws.ReasonClosed)); got != 1 {
		t.Fatalf("closed count %v, want 1", got)
	}
	if got := testutil.ToFloat64(metrics.RateLimited.WithLabelValues(ws.ReasonMessages)); got < 50 {
		t.Fatalf("refused count %v, want the 51 refusals before the close", got)
	}
}

// TestLimits_BytesRefusedConnectionKept checks the byte bucket: a frame over what is
// left is refused with rate_limited while the connection stays open, and a client that
// slows down is served again.
func TestLimits_BytesRefusedConnectionKept(t *testing.T) {
	metrics := ws.NewMetrics(nil)
	h := newHarness(t, func(s *ws.Server) {
		s.Limits = ws.Limits{ByteRate: 1 << 20, ByteBurst: 5000}
		s.Metrics = metrics
	})
	c := welcomed(t, h)
	big := strings.Repeat("b", 4000)
	send(t, c, big)
	send(t, c, big)
	if _, m := recv(t, c); m != big {
		t.Fatalf("first frame: got %.40q", m)
	}
	if _, m := recv(t, c); !strings.Contains(m, `"code":"rate_limited"`) || !strings.Contains(m, "bytes per second") {
		t.Fatalf("second frame: got %.80q, want a rate_limited error", m)
	}
	if got := testutil.ToFloat64(metrics.RateLimited.WithLabelValues(ws.ReasonBytes)); got != 1 {
		t.Fatalf("bytes refused %v, want 1", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		send(t, c, "small")
		if _, m := recv(t, c); m == "small" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the connection was never served again")
		}
	}
}

func TestLimits_ByteBurstHoldsAFullFrame(t *testing.T) {
	if ws.DefaultReadLimit != mapenv.MinConnByteBurst {
		t.Fatalf("read limit %d, MinConnByteBurst %d: a byte burst at the minimum must pass the largest frame", ws.DefaultReadLimit, mapenv.MinConnByteBurst)
	}
}

// TestReply_AheadOfQueuedFrames stops reading while 32 large frames are queued to a
// client, far more than the sockets' buffers hold (a few MiB on loopback while the
// client does not read), then pings: once the client reads again, the pong arrives
// before the frames that were still queued.
func TestReply_AheadOfQueuedFrames(t *testing.T) {
	h := newHarness(t, nil)
	c := welcomed(t, h)
	p := h.game.Peers()[0]
	const frames = 32
	frame := make([]byte, 1<<20) // 32 MiB in all, against a few MiB of socket buffers
	for i := 0; i < frames; i++ {
		if !p.Send(frame, true) {
			t.Fatal("queue full")
		}
	}
	send(t, c, "ping")
	waitFor(t, "the pong to be queued", func() bool { return h.game.Replied() == 1 })

	before, after := 0, 0
	pong := false
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for before+after < frames {
		typ, data, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("after %d frames: %v", before+after, err)
		}
		switch {
		case typ == websocket.TextMessage && string(data) == "pong":
			pong = true
		case pong:
			after++
		default:
			before++
		}
	}
	if !pong || after == 0 {
		t.Fatalf("the pong came after %d of %d frames, behind every frame queued before it", before, frames)
	}
	t.Logf("the pong came after %d frames already in the sockets' buffers, ahead of %d still queued", before, after)
}

// BenchmarkIdleConnections measures the memory one idle welcomed connection holds:
// live heap and goroutine stacks after 1,000 connections, less before, per
// connection. It counts both ends (the clients are minimal: small buffers, no
// goroutine), so the server's share is a little below the figure.
func BenchmarkIdleConnections(b *testing.B) {
	const conns = 1000
	h := &harness{game: &fakeGame{}}
	h.srv = ws.NewServer(h.game, nil)
	ts := httptest.NewServer(h.srv)
	defer ts.Close()
	url := "ws" + strings.TrimPrefix(ts.URL, "http")
	d := websocket.Dialer{ReadBufferSize: 256, WriteBufferSize: 256}
	inUse := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc + m.StackInuse
	}
	before := inUse()
	cs := make([]*websocket.Conn, 0, conns)
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range conns {
		c, _, err := d.Dial(url, nil)
		if err != nil {
			b.Fatal(err)
		}
		cs = append(cs, c)
		if err := c.WriteMessage(websocket.TextMessage, []byte("good")); err != nil {
			b.Fatal(err)
		}
		if _, _, err := c.ReadMessage(); err != nil {
			b.Fatal(err)
		}
	}
	perConn := float64(inUse()-before) / conns
	for b.Loop() {
	}
	b.ReportMetric(perConn, "B/conn")
}

// BenchmarkRound measures one snapshot round through the transport: a 200-byte binary
// frame handed to each of 500 welcomed connections, as the tick hands out a round,
// until every client has read its frame. The clients run in this process, so the
// figure counts both ends; compare it between versions of the transport only.
func BenchmarkRound(b *testing.B) {
	const conns = 500
	h := newHarness(b, nil)
	var got sync.WaitGroup
	for range conns {
		c := welcomed(b, h)
		_ = c.SetReadDeadline(time.Time{}) // welcomed's read left a deadline
		go func() {
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					return
				}
				got.Done()
			}
		}()
	}
	peers := h.game.Peers()
	frame := make([]byte, 200)
	for b.Loop() {
		got.Add(conns)
		for _, p := range peers {
			if !p.Send(frame, true) {
				b.Fatal("a client was dropped")
			}
		}
		got.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*conns), "ns/frame")
}
