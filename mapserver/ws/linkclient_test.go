package ws_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
	"github.com/mapyard/mapyard/mapserver/ws"
)

// A test edge: a link client that opens streams and speaks WebSocket frames in them,
// masked as a browser's.

// testKey and testAccept are RFC 6455's example handshake (section 1.3).
const (
	testKey    = "dGhlIHNhbXBsZSBub25jZQ=="
	testAccept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
)

type linkHarness struct {
	srv  *ws.Server
	game *fakeGame
	addr string // host:port of the game listener
}

func newLinkHarness(t testing.TB, tune func(*ws.Server)) *linkHarness {
	t.Helper()
	h := &linkHarness{game: &fakeGame{}}
	h.srv = ws.NewServer(h.game, nil)
	if tune != nil {
		tune(h.srv)
	}
	mux := http.NewServeMux()
	mux.Handle("/ws", h.srv)
	mux.HandleFunc(edgelink.Path, h.srv.ServeLink)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	h.addr = strings.TrimPrefix(ts.URL, "http://")
	return h
}

type record struct {
	kind byte
	data []byte
}

type testLink struct {
	t    testing.TB
	nc   net.Conn
	wmu  sync.Mutex
	mu   sync.Mutex
	recs map[uint32]chan record
	done chan struct{} // closed when the map ends the link
	// paused, while a test holds it, keeps the client from reading the link.
	paused sync.Mutex
}

// dialLink opens a link to h, checking the 101 answer.
func (h *linkHarness) dialLink(t testing.TB) *testLink {
	t.Helper()
	return h.dialLinkWith(t, "")
}

// dialLinkWith opens a link to h whose request lists features in edgelink.FeatureHeader
// (none when empty), checking the 101 answer.
func (h *linkHarness) dialLinkWith(t testing.TB, features string) *testLink {
	t.Helper()
	nc, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	extra := ""
	if features != "" {
		extra = edgelink.FeatureHeader + ": " + features + "\r\n"
	}
	_, _ = io.WriteString(nc, "GET "+edgelink.Path+" HTTP/1.1\r\nHost: "+h.addr+"\r\nConnection: Upgrade\r\nUpgrade: "+edgelink.Protocol+"\r\n"+extra+"\r\n")
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != edgelink.Protocol ||
		!strings.EqualFold(resp.Header.Get("Connection"), "upgrade") {
		t.Fatalf("link upgrade answered %s %v", resp.Status, resp.Header)
	}
	l := &testLink{t: t, nc: nc, recs: make(map[uint32]chan record), done: make(chan struct{})}
	go l.read(br)
	return l
}

func (l *testLink) read(br *bufio.Reader) {
	defer close(l.done)
	var hdr [edgelink.HeaderSize]byte
	for {
		l.paused.Lock()
		l.paused.Unlock() // waits for a test's pause to end
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		h, err := edgelink.ParseHeader(hdr[:])
		if err != nil {
			l.t.Errorf("map sent a bad record: %v", err)
			return
		}
		data := make([]byte, h.Len)
		if _, err := io.ReadFull(br, data); err != nil {
			return
		}
		if h.Kind == edgelink.KindOpen {
			l.t.Errorf("map sent an Open record")
		}
		l.mu.Lock()
		ch := l.recs[h.Stream]
		l.mu.Unlock()
		if ch == nil {
			l.t.Errorf("record %d for stream %d, never opened", h.Kind, h.Stream)
			continue
		}
		ch <- record{h.Kind, data}
	}
}

// write sends one record.
func (l *testLink) write(kind byte, id uint32, payload []byte) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if _, err := l.nc.Write(append(edgelink.AppendHeader(nil, kind, id, len(payload)), payload...)); err != nil {
		l.t.Fatalf("link write: %v", err)
	}
}

// upgradeRequest is a browser's upgrade as the edge forwards it; extra are more header
// lines.
func upgradeRequest(extra ...string) []byte {
	return []byte("GET /ws?ticket=secret-ticket HTTP/1.1\r\nHost: play.example\r\nConnection: Upgrade\r\n" +
		"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + testKey + "\r\n" +
		"X-Forwarded-For: 203.0.113.7\r\n" + strings.Join(extra, "") + "\r\n")
}

type testStream struct {
	l    *testLink
	id   uint32
	recs chan record
	buf  []byte // server bytes not parsed yet
	resp string // the HTTP response
}

// open sends an Open record with req and reads the map's HTTP response.
func (l *testLink) open(id uint32, req []byte) *testStream {
	s := &testStream{l: l, id: id, recs: make(chan record, 4096)}
	l.mu.Lock()
	l.recs[id] = s.recs
	l.mu.Unlock()
	l.write(edgelink.KindOpen, id, req)
	r := s.record()
	if r.kind != edgelink.KindData {
		l.t.Fatalf("stream %d: first record is kind %d", id, r.kind)
	}
	s.resp = string(r.data)
	return s
}

// accept opens a stream and checks the 101.
func (l *testLink) accept(id uint32) *testStream {
	l.t.Helper()
	s := l.open(id, upgradeRequest())
	if !strings.HasPrefix(s.resp, "HTTP/1.1 101 ") || !strings.Contains(s.resp, "\r\nSec-WebSocket-Accept: "+testAccept+"\r\n") ||
		!strings.HasSuffix(s.resp, "\r\n\r\n") {
		l.t.Fatalf("stream %d: upgrade answered %q", id, s.resp)
	}
	return s
}

// welcomed opens a stream and passes its hello.
func (l *testLink) welcomed(id uint32) *testStream {
	l.t.Helper()
	s := l.accept(id)
	s.send(frame(true, 0x1, []byte("good")))
	if op, m := s.frame(); op != 0x1 || m != `{"kind":"welcome"}` {
		l.t.Fatalf("stream %d: got %d %q, want the welcome", id, op, m)
	}
	// The welcome may come before Hello has returned: the game's answer to a ping says
	// the session is serving the stream.
	s.send(text("ping"))
	if _, m := s.frame(); m != "pong" {
		l.t.Fatalf("stream %d: got %q, want pong", id, m)
	}
	return s
}

func (s *testStream) record() record {
	s.l.t.Helper()
	select {
	case r := <-s.recs:
		return r
	case <-time.After(5 * time.Second):
		s.l.t.Fatalf("stream %d: no record within 5s", s.id)
		return record{}
	}
}

// send sends bytes as one Data record.
func (s *testStream) send(b ...[]byte) {
	var all []byte
	for _, x := range b {
		all = append(all, x...)
	}
	s.l.write(edgelink.KindData, s.id, all)
}

// frame reads the next server frame (which must be unmasked and whole).
func (s *testStream) frame() (byte, string) {
	s.l.t.Helper()
	for {
		if op, payload, n := parseServerFrame(s.l.t, s.buf); n > 0 {
			s.buf = s.buf[n:]
			return op, string(payload)
		}
		r := s.record()
		if r.kind != edgelink.KindData {
			s.l.t.Fatalf("stream %d: record kind %d while a frame was expected (%d bytes left)", s.id, r.kind, len(s.buf))
		}
		s.buf = append(s.buf, r.data...)
	}
}

// wantClose reads frames up to the close frame, checks its code, and expects the
// stream's Close record right after it.
func (s *testStream) wantClose(code int) []string {
	s.l.t.Helper()
	var before []string
	for {
		op, m := s.frame()
		if op != 0x8 {
			before = append(before, m)
			continue
		}
		if len(m) < 2 || int(binary.BigEndian.Uint16([]byte(m))) != code {
			s.l.t.Fatalf("stream %d: close frame %q, want code %d (after %q)", s.id, m, code, before)
		}
		break
	}
	if len(s.buf) != 0 {
		s.l.t.Fatalf("stream %d: %d bytes after the close frame", s.id, len(s.buf))
	}
	if r := s.record(); r.kind != edgelink.KindClose || len(r.data) != 0 {
		s.l.t.Fatalf("stream %d: record kind %d after the close frame, want Close", s.id, r.kind)
	}
	return before
}

func parseServerFrame(t testing.TB, b []byte) (byte, []byte, int) {
	if len(b) < 2 {
		return 0, nil, 0
	}
	if b[0]&0x80 == 0 || b[1]&0x80 != 0 {
		t.Fatalf("server frame not final or masked: % x", b[:2])
	}
	n, h := int(b[1]&0x7F), 2
	switch n {
	case 126:
		if len(b) < 4 {
			return 0, nil, 0
		}
		n, h = int(binary.BigEndian.Uint16(b[2:])), 4
	case 127:
		if len(b) < 10 {
			return 0, nil, 0
		}
		n, h = int(binary.BigEndian.Uint64(b[2:])), 10
	}
	if len(b) < h+n {
		return 0, nil, 0
	}
	return b[0] & 0x0F, b[h : h+n], h + n
}

// frame is a client frame, masked.
func frame(fin bool, op byte, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		out = append(out, 0x80|byte(n))
	case n <= 0xFFFF:
		out = append(out, 0x80|126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, 0x80|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	out = append(out, key[:]...)
	for i, c := range payload {
		out = append(out, c^key[i&3])
	}
	return out
}

func text(m string) []byte { return frame(true, 0x1, []byte(m)) }
