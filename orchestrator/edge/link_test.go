package edge_test

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/ws"
	"github.com/mapyard/mapyard/orchestrator/edge"
)

// linkMap is a map's side of links, small enough to drive by hand: it answers every
// stream's upgrade with open (101 unless set otherwise), records what each stream
// sends, and lets the test send records.
type linkMap struct {
	*httptest.Server
	t      testing.TB
	status int // the answer to a stream's upgrade; 101 when zero

	mu      sync.Mutex
	links   []net.Conn
	opened  []*http.Request   // by stream id - 1
	got     map[uint32][]byte // unmasked payloads of the client's frames, concatenated
	closed  map[uint32]bool   // the edge ended the stream
	changed chan struct{}
}

func newLinkMap(t testing.TB) *linkMap {
	m := &linkMap{t: t, got: map[uint32][]byte{}, closed: map[uint32]bool{}, changed: make(chan struct{})}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != edgelink.Path || r.Header.Get("Upgrade") != edgelink.Protocol {
			http.Error(w, "not a link", http.StatusNotFound)
			return
		}
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+edgelink.Protocol+"\r\n\r\n")
		m.mu.Lock()
		m.links = append(m.links, c)
		m.mu.Unlock()
		m.notify()
		go m.serve(c, rw.Reader)
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *linkMap) notify() {
	m.mu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

func (m *linkMap) serve(c net.Conn, br *bufio.Reader) {
	defer c.Close()
	hdr := make([]byte, edgelink.HeaderSize)
	for {
		if _, err := io.ReadFull(br, hdr); err != nil {
			return
		}
		h, err := edgelink.ParseHeader(hdr)
		if err != nil {
			m.t.Errorf("edge sent a bad record: %v", err)
			return
		}
		payload := make([]byte, h.Len)
		if _, err := io.ReadFull(br, payload); err != nil {
			return
		}
		switch h.Kind {
		case edgelink.KindOpen:
			req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(payload)))
			if err != nil {
				m.t.Errorf("stream %d opened with a bad request: %v", h.Stream, err)
				return
			}
			m.mu.Lock()
			m.opened = append(m.opened, req)
			status := m.status
			m.mu.Unlock()
			if status != 0 {
				body := `{"error":"refused"}`
				m.send(c, edgelink.KindData, h.Stream, []byte("HTTP/1.1 "+strconv.Itoa(status)+" "+http.StatusText(status)+
					"\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\nConnection: close\r\n\r\n"+body))
				m.send(c, edgelink.KindClose, h.Stream, nil)
				continue
			}
			sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
			m.send(c, edgelink.KindData, h.Stream, []byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "+
				base64.StdEncoding.EncodeToString(sum[:])+"\r\n\r\n"))
		case edgelink.KindData:
			m.mu.Lock()
			m.got[h.Stream] = append(m.got[h.Stream], unmask(m.t, payload)...)
			m.mu.Unlock()
		case edgelink.KindClose:
			m.mu.Lock()
			m.closed[h.Stream] = true
			m.mu.Unlock()
		}
		m.notify()
	}
}

// unmask returns the payloads of the masked client frames in b (which holds whole
// frames: the test's messages are small and sent one at a time).
func unmask(t testing.TB, b []byte) []byte {
	var out []byte
	for len(b) > 0 {
		if len(b) < 6 || b[1]&0x80 == 0 {
			t.Errorf("client frame not masked or cut: % x", b)
			return out
		}
		n, p := int(b[1]&0x7F), 2
		if n == 126 {
			n, p = int(binary.BigEndian.Uint16(b[2:4])), 4
		}
		key := b[p : p+4]
		payload := b[p+4 : p+4+n]
		for i := range payload {
			out = append(out, payload[i]^key[i%4])
		}
		b = b[p+4+n:]
	}
	return out
}

// send writes one record on link c.
func (m *linkMap) send(c net.Conn, kind byte, id uint32, payload []byte) {
	b := edgelink.AppendHeader(nil, kind, id, len(payload))
	if _, err := c.Write(append(b, payload...)); err != nil {
		m.t.Logf("link write: %v", err)
	}
}

// text is one unmasked server text frame.
func text(s string) []byte { return append([]byte{0x81, byte(len(s))}, s...) }

// waitMap waits until cond holds on the map's records.
func (m *linkMap) wait(what string, cond func() bool) {
	m.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		m.mu.Lock()
		ok, ch := cond(), m.changed
		m.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			m.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (m *linkMap) link(i int) net.Conn {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.links[i]
}

func openLinkEdge(t *testing.T, m *linkMap) *edge.Edge {
	orch := newFakeOrch(t, ready("forest-1", portOf(t, m.Server)))
	return MustOpenEdge(t, orch.URL, nil)
}

// TestLink_CarriesEveryPlayer: three players forwarded to one map share one link; each
// stream opens with the player's upgrade request as the map would have got it, and
// carries that player's bytes both ways, to the right player only.
func TestLink_CarriesEveryPlayer(t *testing.T) {
	m := newLinkMap(t)
	e := openLinkEdge(t, m)
	var players []*websocket.Conn
	for range 3 {
		c, _, err := websocket.DefaultDialer.Dial(wsURL(e, "forest-1")+"?ticket=secret-ticket", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		players = append(players, c)
	}
	m.mu.Lock()
	links, opened := len(m.links), len(m.opened)
	req := m.opened[0]
	m.mu.Unlock()
	if links != 1 || opened != 3 {
		t.Fatalf("%d links carry %d streams, want 1 link and 3 streams", links, opened)
	}
	if got := metricValue(t, e, "mapyard_edge_map_links"); got != "1" {
		t.Fatalf("mapyard_edge_map_links = %q, want 1", got)
	}
	if req.URL.Path != "/ws" || req.URL.RawQuery != "ticket=secret-ticket" || req.Header.Get("X-Forwarded-For") != "127.0.0.1" ||
		!strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
		t.Fatalf("stream opened with %s %s, X-Forwarded-For %q, Upgrade %q", req.Method, req.URL, req.Header.Get("X-Forwarded-For"), req.Header.Get("Upgrade"))
	}
	for i, c := range players {
		if err := c.WriteMessage(websocket.TextMessage, []byte("from player "+strconv.Itoa(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	m.wait("every player's message on its stream", func() bool {
		for i := range players {
			if string(m.got[uint32(i+1)]) != "from player "+strconv.Itoa(i+1) {
				return false
			}
		}
		return true
	})
	for i := range players {
		m.send(m.link(0), edgelink.KindData, uint32(i+1), text("to player "+strconv.Itoa(i+1)))
	}
	for i, c := range players {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, got, err := c.ReadMessage()
		if err != nil || string(got) != "to player "+strconv.Itoa(i+1) {
			t.Fatalf("player %d read %q, %v", i+1, got, err)
		}
	}
}

// TestLink_Ends: a stream the map ends delivers its last frames and then the end of
// the player's connection; a player that leaves is a Close record to the map; a link
// that breaks ends its players' connections with public.CloseMapGone, and the next
// player gets a new link.
func TestLink_Ends(t *testing.T) {
	m := newLinkMap(t)
	e := openLinkEdge(t, m)
	dial := func() *websocket.Conn {
		c, _, err := websocket.DefaultDialer.Dial(wsURL(e, "forest-1"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := dial(), dial()

	m.send(m.link(0), edgelink.KindData, 1, append(text("bye"), 0x88, 2, 0x03, 0xE8))
	m.send(m.link(0), edgelink.KindClose, 1, nil)
	_ = a.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, got, err := a.ReadMessage(); err != nil || string(got) != "bye" {
		t.Fatalf("last frame: %q, %v", got, err)
	}
	if _, _, err := a.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Fatalf("after the map's close frame: %v, want close 1000", err)
	}

	b.Close()
	m.wait("the Close record of the player that left", func() bool { return m.closed[2] })

	c := dial()
	m.link(0).Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := c.ReadMessage(); !websocket.IsCloseError(err, public.CloseMapGone) {
		t.Fatalf("a player's connection after its link broke: %v, want close %d", err, public.CloseMapGone)
	}
	d := dial()
	m.wait("a second link", func() bool { return len(m.links) == 2 })
	if err := d.WriteMessage(websocket.TextMessage, []byte("again")); err != nil {
		t.Fatal(err)
	}
	m.wait("a message on the new link", func() bool { return string(m.got[1]) == "again" })
}

// TestLink_MapRefusal: the map's refusal of a stream's upgrade is the player's HTTP
// error, as over a connection of its own.
func TestLink_MapRefusal(t *testing.T) {
	m := newLinkMap(t)
	m.status = http.StatusForbidden
	e := openLinkEdge(t, m)
	_, resp, err := websocket.DefaultDialer.Dial(wsURL(e, "forest-1"), nil)
	if err == nil {
		t.Fatal("upgrade refused by the map went through")
	}
	errorOf(t, resp, http.StatusForbidden, "forbidden")
}

// TestLink_SlowPlayerDropped: a player that reads nothing while its map sends is
// dropped once what waits for it passes the edge's bound, and the map is told; the
// link and the other players go on.
func TestLink_SlowPlayerDropped(t *testing.T) {
	m := newLinkMap(t)
	e := openLinkEdge(t, m)
	slow, _, err := websocket.DefaultDialer.Dial(wsURL(e, "forest-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	other, _, err := websocket.DefaultDialer.Dial(wsURL(e, "forest-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	frame := append([]byte{0x82, 126, 0xFF, 0xFF}, make([]byte, 0xFFFF)...)
	for i := 0; i < 200 && !m.isClosed(1); i++ {
		m.send(m.link(0), edgelink.KindData, 1, frame)
	}
	m.wait("the slow player's Close record", func() bool { return m.closed[1] })
	if got := metricValue(t, e, "mapyard_edge_slow_players_dropped_total"); got != "1" {
		t.Fatalf("mapyard_edge_slow_players_dropped_total = %q, want 1", got)
	}
	m.send(m.link(0), edgelink.KindData, 2, text("still here"))
	_ = other.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, got, err := other.ReadMessage(); err != nil || string(got) != "still here" {
		t.Fatalf("other player read %q, %v", got, err)
	}
}

func (m *linkMap) isClosed(id uint32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed[id]
}

// TestLink_RealMapTransport: players forwarded by the edge to the map's own transport
// (mapserver/ws) share one link, are welcomed, and are answered, each on its own
// connection; a player the map closes gets its close code.
func TestLink_RealMapTransport(t *testing.T) {
	g := &roundGame{in: make(chan struct{}, 64)}
	srv := ws.NewServer(g, slog.New(slog.DiscardHandler))
	game := gameListener(t, srv)
	orch := newFakeOrch(t, ready("forest-1", portOf(t, game)))
	e := MustOpenEdge(t, orch.URL, nil)
	var players []*websocket.Conn
	for range 5 {
		players = append(players, dialWelcomed(t, wsURL(e, "forest-1")))
	}
	if n := testutil.ToFloat64(srv.Metrics.Links); n != 1 {
		t.Fatalf("the map has %v links from the edge, want 1", n)
	}
	if n := srv.Active(); n != 5 {
		t.Fatalf("the map serves %d players, want 5", n)
	}
	g.mu.Lock()
	peers := g.peers
	g.mu.Unlock()
	for i, p := range peers {
		p.Send([]byte("to "+strconv.Itoa(i)), false)
	}
	for _, c := range players {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, got, err := c.ReadMessage()
		if err != nil || !strings.HasPrefix(string(got), "to ") {
			t.Fatalf("player read %q, %v", got, err)
		}
	}
	// The peers were welcomed in the order the players dialled.
	peers[0].Close(4000, "replaced")
	if _, _, err := players[0].ReadMessage(); !websocket.IsCloseError(err, 4000) {
		t.Fatalf("closed player: %v, want close 4000", err)
	}
	peers[1].Send([]byte("still here"), false)
	if _, got, err := players[1].ReadMessage(); err != nil || string(got) != "still here" {
		t.Fatalf("next player read %q, %v", got, err)
	}
	waitFor(t, "the map to count the closed player out", func() bool { return srv.Active() == 4 })
}

// metricValue returns the value of the unlabelled series name on e's metrics listener.
func metricValue(tb testing.TB, e *edge.Edge, name string) string {
	tb.Helper()
	resp, err := http.Get(e.MetricsURL() + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}
