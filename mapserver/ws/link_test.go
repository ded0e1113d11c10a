package ws_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
	"github.com/mapyard/mapyard/mapserver/ws"
)

// TestLink_StreamFramesBothWays opens a stream, passes its hello, and checks that
// messages reach the session in order however the edge cut the bytes into records
// (frames split across records, several frames in one record, a fragmented message),
// and that what the session sends arrives as Data records.
func TestLink_StreamFramesBothWays(t *testing.T) {
	h := newLinkHarness(t, nil)
	l := h.dialLink(t)
	s := l.welcomed(7)
	if got := h.game.Peers()[0].Remote(); got != "203.0.113.7" {
		t.Fatalf("Remote() = %q, want the X-Forwarded-For address", got)
	}

	var all []byte
	for _, m := range []string{"one", "two", strings.Repeat("3", 300)} {
		all = append(all, text(m)...)
	}
	all = append(all, frame(false, 0x1, []byte("fo"))...)
	all = append(all, frame(false, 0x0, []byte("u"))...)
	all = append(all, frame(true, 0x0, []byte("r"))...)
	all = append(all, frame(true, 0x2, []byte{1, 2, 3})...)
	for len(all) > 0 { // records of 5 bytes: every frame is split, some records end two
		n := min(5, len(all))
		s.send(all[:n])
		all = all[n:]
	}
	for _, want := range []struct {
		op byte
		m  string
	}{{0x1, "one"}, {0x1, "two"}, {0x1, strings.Repeat("3", 300)}, {0x1, "four"}, {0x2, "\x01\x02\x03"}} {
		if op, m := s.frame(); op != want.op || m != want.m {
			t.Fatalf("got %d %.20q, want %d %.20q", op, m, want.op, want.m)
		}
	}

	// Several whole frames in one record.
	s.send(text("a"), text("b"), text("c"))
	for _, want := range []string{"a", "b", "c"} {
		if _, m := s.frame(); m != want {
			t.Fatalf("got %q, want %q", m, want)
		}
	}

	// The game's own sends, as the tick makes them.
	p := h.game.Peers()[0]
	big := strings.Repeat("s", 70<<10)
	if !p.Send([]byte("snap"), true) || !p.Send([]byte(big), true) {
		t.Fatal("Send refused")
	}
	if op, m := s.frame(); op != 0x2 || m != "snap" {
		t.Fatalf("got %d %q", op, m)
	}
	if op, m := s.frame(); op != 0x2 || m != big {
		t.Fatalf("got %d and %d bytes, want a binary frame of %d", op, len(m), len(big))
	}
}

// TestLink_Pings checks the answers the reader makes at once: a pong to the client's
// ping frame, and the game's Reply to a ping message, even while writes are held.
func TestLink_Pings(t *testing.T) {
	h := newLinkHarness(t, nil)
	l := h.dialLink(t)
	s := l.welcomed(1)
	h.srv.HoldWrites()
	defer h.srv.ReleaseWrites()
	s.send(frame(true, 0x9, []byte("rtt")))
	if op, m := s.frame(); op != 0xA || m != "rtt" {
		t.Fatalf("got %d %q, want the pong", op, m)
	}
	s.send(text("ping"))
	if op, m := s.frame(); op != 0x1 || m != "pong" {
		t.Fatalf("got %d %q, want the game's pong", op, m)
	}
	s.send(frame(true, 0xA, nil)) // an unsolicited pong is ignored
	s.send(text("ping"))
	if _, m := s.frame(); m != "pong" {
		t.Fatalf("got %q", m)
	}
}

// TestLink_ManyStreams serves 50 streams on one link, counted as connections, and ends
// every session when the link closes.
func TestLink_ManyStreams(t *testing.T) {
	h := newLinkHarness(t, nil)
	l := h.dialLink(t)
	const n = 50
	streams := make([]*testStream, n)
	for i := range streams {
		streams[i] = l.welcomed(uint32(i + 1))
	}
	if got := h.srv.Active(); got != n {
		t.Fatalf("Active() = %d, want %d", got, n)
	}
	for i, s := range streams {
		s.send(text("from " + string(rune('A'+i%26))))
	}
	for i, s := range streams {
		if _, m := s.frame(); m != "from "+string(rune('A'+i%26)) {
			t.Fatalf("stream %d got %q", i+1, m)
		}
	}
	l.nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Drain(ctx); err != nil {
		t.Fatalf("drain after the link closed: %v, %d left", err, h.srv.Active())
	}
	if got := h.game.Closed(); got != n {
		t.Fatalf("%d sessions closed, want %d", got, n)
	}
	for _, p := range h.game.Peers() {
		if p.Send([]byte("late"), true) {
			t.Fatal("a stream of a closed link took a frame")
		}
	}
}

// TestLink_StreamUpgradeRefused checks the refusals of a stream's upgrade: 403 for
// another site's origin, 400 for a request that is no WebSocket upgrade, each followed
// by the Close record, and no stream counted.
func TestLink_StreamUpgradeRefused(t *testing.T) {
	h := newLinkHarness(t, nil)
	l := h.dialLink(t)
	for i, tc := range []struct {
		req    []byte
		status string
	}{
		{upgradeRequest("Origin: https://evil.example\r\n"), "403"},
		{[]byte("GET /ws HTTP/1.1\r\nHost: play.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\n"), "400"},
		{[]byte("POST /ws HTTP/1.1\r\nHost: play.example\r\nContent-Length: 0\r\n\r\n"), "400"},
		{[]byte("not http at all"), "400"},
	} {
		s := l.open(uint32(10+i), tc.req)
		if !strings.HasPrefix(s.resp, "HTTP/1.1 "+tc.status+" ") || !strings.Contains(s.resp, "Connection: close\r\n") {
			t.Fatalf("case %d: answered %q, want %s", i, s.resp, tc.status)
		}
		body := s.resp[strings.Index(s.resp, "\r\n\r\n")+4:]
		var env struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal([]byte(body), &env); err != nil || env.Error.Code == "" {
			t.Fatalf("case %d: body %q, want the error envelope", i, body)
		}
		if r := s.record(); r.kind != edgelink.KindClose {
			t.Fatalf("case %d: record kind %d after the refusal, want Close", i, r.kind)
		}
	}
	// Same origin passes.
	l.accept(20)
	if got := h.srv.Active(); got != 1 {
		t.Fatalf("Active() = %d, want 1", got)
	}
	// The link itself is still served.
	l.welcomed(21)
}

// TestLink_UpgradeRefused checks that a request to the link's path that is no link
// upgrade gets 400 with the error envelope.
func TestLink_UpgradeRefused(t *testing.T) {
	h := newLinkHarness(t, nil)
	for _, header := range []http.Header{
		{},
		{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}},
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+h.addr+edgelink.Path, nil)
		req.Header = header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"code":"bad_request"`) ||
			!strings.Contains(string(body), edgelink.Protocol) {
			t.Fatalf("answered %d %s", resp.StatusCode, body)
		}
	}
}

func TestLink_UnmaskedFrameCloses1002(t *testing.T) {
	h := newLinkHarness(t, nil)
	l := h.dialLink(t)
	s := l.welcomed(1)
	s.send([]byte{0x81, 0x02, 'h', 'i'})
	s.wantClose(1002)
	waitFor(t, "Closed", func() bool { return h.game.Closed() == 1 && h.srv.Active() == 0 })
}

func TestLink_TooBigCloses1009(t *testing.T) {
	h := newLinkHarness(t, nil)
	l := h.dialLink(t)
	s := l.welcomed(1)
	s.send(text(strings.Repeat("x", ws.DefaultReadLimit)))
	if _, m := s.frame(); len(m) != ws.DefaultReadLimit {
		t.Fatalf("a message of the read limit: got %d bytes back", len(m))
	}
	// Over the limit in fragments: refused when the frame that crosses it arrives.
	s.send(frame(false, 0x1, []byte(strings.Repeat("x", ws.DefaultReadLimit-10))), frame(true, 0x0, []byte(strings.Repeat("x", 11))))
	s.wantClose(mapserver.CloseTooBig)
	waitFor(t, "Closed", func() bool { return h.game.Closed() == 1 })

	// One frame over the limit: refused from its header.
	s = l.welcomed(2)
	s.send(frame(true, 0x2, make([]byte, ws.DefaultReadLimit+1))[:20])
	s.wantClose(mapserver.CloseTooBig)
}

// TestLink_ClientClose checks the close handshake started by the client: the map
// answers with its close frame and the Close record, and the session ends.
func TestLink_ClientClose(t *testing.T) {
	h := newLinkHarness(t, nil)
	l := h.dialLink(t)
	s := l.welcomed(1)
	s.send(frame(true, 0x8, binary.BigEndian.AppendUint16(nil, 1001)), text("after the close"))
	s.wantClose(1001)
	waitFor(t, "Closed", func() bool { return h.game.Closed() == 1 && h.srv.Active() == 0 })

	s = l.welcomed(2)
	s.send(frame(true, 0x8, nil))
	s.wantClose(mapserver.CloseNormal)
	waitFor(t, "Closed", func() bool { return h.game.Closed() == 2 })
}

// TestLink_EdgeClose checks that the edge's Close record ends the stream and its
// session, without an answer; records for the ended stream are ignored.
func TestLink_EdgeClose(t *testing.T) {
	h := newLinkHarness(t, nil)
	l := h.dialLink(t)
	s := l.welcomed(1)
	other := l.welcomed(2)
	l.write(edgelink.KindClose, 1, nil)
	waitFor(t, "Closed", func() bool { return h.game.Closed() == 1 && h.srv.Active() == 1 })
	s.send(text("late"))
	l.write(edgelink.KindClose, 1, nil)
	l.write(edgelink.KindData, 99, text("unknown"))
	other.send(text("still here"))
	if _, m := other.frame(); m != "still here" {
		t.Fatalf("got %q", m)
	}
	select {
	case r := <-s.recs:
		t.Fatalf("a record (kind %d) for a stream the edge closed", r.kind)
	default:
	}
}

// TestLink_ProtocolErrorEndsLink checks that a record of unknown kind closes the link
// and ends every stream on it.
func TestLink_ProtocolErrorEndsLink(t *testing.T) {
	h := newLinkHarness(t, func(s *ws.Server) { s.Metrics = ws.NewMetrics(nil) })
	l := h.dialLink(t)
	l.welcomed(1)
	l.welcomed(2)
	if got := testutil.ToFloat64(h.srv.Metrics.Links); got != 1 {
		t.Fatalf("links gauge %v, want 1", got)
	}
	l.write(9, 1, nil)
	select {
	case <-l.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the link stayed open")
	}
	waitFor(t, "Closed", func() bool { return h.game.Closed() == 2 && h.srv.Active() == 0 })
	waitFor(t, "the links gauge", func() bool { return testutil.ToFloat64(h.srv.Metrics.Links) == 0 })
}

func TestLink_HelloTimeout(t *testing.T) {
	h := newLinkHarness(t, func(s *ws.Server) { s.HelloTimeout = 100 * time.Millisecond })
	l := h.dialLink(t)
	s := l.accept(1)
	before := s.wantClose(mapserver.ClosePolicy)
	if len(before) != 1 || !strings.Contains(before[0], `"code":"bad_request"`) || !strings.Contains(before[0], "no hello within 100ms") {
		t.Fatalf("got %q before the close, want the bad_request error", before)
	}
	waitFor(t, "the stream to end", func() bool { return h.srv.Active() == 0 })
	if h.game.Closed() != 0 {
		t.Fatal("a stream without a hello had a session")
	}
}

func TestLink_HelloRefused(t *testing.T) {
	h := newLinkHarness(t, nil)
	l := h.dialLink(t)
	s := l.accept(1)
	s.send(text("bad"))
	if before := s.wantClose(mapserver.ClosePolicy); len(before) != 1 || !strings.Contains(before[0], "expected good") {
		t.Fatalf("got %q before the close", before)
	}
	waitFor(t, "the stream to end", func() bool { return h.srv.Active() == 0 })
}

// TestLink_MessagesDuringHello holds the Handshaker while the client sends more: those
// messages reach the session after the hello, in order.
func TestLink_MessagesDuringHello(t *testing.T) {
	h := newLinkHarness(t, nil)
	h.game.gate = make(chan struct{})
	l := h.dialLink(t)
	s := l.accept(1)
	// The pong at the end of the record says the reader has handled all of it.
	s.send(text("good"), text("m1"), text("m2"), frame(true, 0x2, []byte("m3")), frame(true, 0x9, nil))
	if op, _ := s.frame(); op != 0xA {
		t.Fatalf("got opcode %d, want the pong", op)
	}
	close(h.game.gate)
	for _, want := range []string{`{"kind":"welcome"}`, "m1", "m2", "m3"} {
		if _, m := s.frame(); m != want {
			t.Fatalf("got %q, want %q", m, want)
		}
	}
}

// TestLink_TooManyMessagesDuringHello closes a stream that floods while its hello is
// answered.
func TestLink_TooManyMessagesDuringHello(t *testing.T) {
	h := newLinkHarness(t, nil)
	h.game.gate = make(chan struct{})
	l := h.dialLink(t)
	s := l.accept(1)
	msgs := [][]byte{text("good")}
	for range 100 {
		msgs = append(msgs, text("early"))
	}
	s.send(msgs...)
	s.wantClose(mapserver.ClosePolicy)
	close(h.game.gate)
	waitFor(t, "the stream to end", func() bool { return h.srv.Active() == 0 })
}

// TestLink_EndDuringHello closes the link while the Handshaker has a stream's hello:
// the session it returns is closed at once.
func TestLink_EndDuringHello(t *testing.T) {
	h := newLinkHarness(t, nil)
	h.game.gate = make(chan struct{})
	l := h.dialLink(t)
	s := l.accept(1)
	s.send(text("good"), frame(true, 0x9, nil))
	if op, _ := s.frame(); op != 0xA {
		t.Fatalf("got opcode %d, want the pong", op)
	}
	l.nc.Close()
	<-l.done
	if h.srv.Active() != 1 {
		t.Fatalf("Active() = %d while the hello runs, want 1", h.srv.Active())
	}
	close(h.game.gate)
	waitFor(t, "the session to close", func() bool { return h.game.Closed() == 1 && h.srv.Active() == 0 })
}

// TestLink_RateLimited floods a stream over its message rate: the burst reaches the
// session, the rest is refused with rate_limited, and the stream is closed with 1008.
func TestLink_RateLimited(t *testing.T) {
	metrics := ws.NewMetrics(nil)
	h := newLinkHarness(t, func(s *ws.Server) {
		s.Limits = ws.Limits{MsgRate: 1, MsgBurst: 10}
		s.Metrics = metrics
	})
	l := h.dialLink(t)
	s := l.welcomed(1)
	var flood [][]byte
	for range 200 {
		flood = append(flood, text("flood"))
	}
	s.send(flood...)
	echoed, refused := 0, 0
	for _, m := range s.wantClose(mapserver.ClosePolicy) {
		switch {
		case m == "flood":
			echoed++
		case strings.Contains(m, `"code":"rate_limited"`):
			refused++
		default:
			t.Fatalf("unexpected %s", m)
		}
	}
	// welcomed's ping took one message of the burst.
	if echoed < 9 || echoed > 11 || refused == 0 {
		t.Fatalf("%d messages passed (want the rest of the burst of 10 and at most a refill), %d refusals answered", echoed, refused)
	}
	if got := testutil.ToFloat64(metrics.RateLimited.WithLabelValues(ws.ReasonClosed)); got != 1 {
		t.Fatalf("closed count %v, want 1", got)
	}
}

// TestLink_IdleAndKeepalive checks that a stream written nothing for half the idle
// timeout is pinged, and one whose client sent nothing for the idle timeout is closed.
func TestLink_IdleAndKeepalive(t *testing.T) {
	const idle = 200 * time.Millisecond
	h := newLinkHarness(t, func(s *ws.Server) { s.IdleTimeout = idle })
	l := h.dialLink(t)
	s := l.welcomed(1)
	start := time.Now()
	if op, _ := s.frame(); op != 0x9 {
		t.Fatalf("got opcode %d, want a ping", op)
	}
	s.wantClose(mapserver.CloseNormal)
	if took := time.Since(start); took < idle-idle/8 {
		t.Fatalf("closed after %v, before the idle timeout", took)
	}
	waitFor(t, "Closed", func() bool { return h.game.Closed() == 1 })
}

// TestLink_Drain closes every stream from the game, as a stopping map does: the close
// frames are written, and Drain returns once every stream has ended.
func TestLink_Drain(t *testing.T) {
	h := newLinkHarness(t, nil)
	l := h.dialLink(t)
	a, b := l.welcomed(1), l.welcomed(2)
	conn := dial(t, "ws://"+h.addr+"/ws", nil)
	send(t, conn, "good")
	recv(t, conn)
	if got := h.srv.Active(); got != 3 {
		t.Fatalf("Active() = %d, want 3", got)
	}
	for _, p := range h.game.Peers() {
		p.Send([]byte("bye"), false)
		p.Close(mapserver.CloseGoingAway, "map stopping")
	}
	for _, s := range []*testStream{a, b} {
		if before := s.wantClose(mapserver.CloseGoingAway); len(before) != 1 || before[0] != "bye" {
			t.Fatalf("got %q before the close", before)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Drain(ctx); err != nil {
		t.Fatalf("drain: %v, %d left, %d closed", err, h.srv.Active(), h.game.Closed())
	}
	if h.game.Closed() != 3 {
		t.Fatalf("%d sessions closed, want 3", h.game.Closed())
	}
}

// TestLink_SlowStreamDropped checks that a stream whose queue fills (the edge keeps
// reading: the game sends faster than the queue holds, within one pass) is dropped
// with a Close record, while the link and its other streams go on.
func TestLink_SlowStreamDropped(t *testing.T) {
	h := newLinkHarness(t, func(s *ws.Server) { s.SendQueue = 4 })
	l := h.dialLink(t)
	s := l.welcomed(1)
	other := l.welcomed(2)
	p := h.game.Peers()[0]
	h.srv.HoldWrites()
	dropped := false
	for range 10 {
		if !p.Send([]byte("x"), true) {
			dropped = true
			break
		}
	}
	h.srv.ReleaseWrites()
	if !dropped {
		t.Fatal("a full queue did not drop the stream")
	}
	for {
		r := s.record()
		if r.kind == edgelink.KindClose {
			break
		}
	}
	waitFor(t, "Closed", func() bool { return h.game.Closed() == 1 && h.srv.Active() == 1 })
	other.send(text("still here"))
	if _, m := other.frame(); m != "still here" {
		t.Fatalf("got %q", m)
	}
}

// TestLink_RecordsInTheUpgrade checks that records the edge sends right behind its
// upgrade request, in the same write, are read.
func TestLink_RecordsInTheUpgrade(t *testing.T) {
	h := newLinkHarness(t, nil)
	nc, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := "GET " + edgelink.Path + " HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\nUpgrade: " + edgelink.Protocol + "\r\n\r\n"
	open := upgradeRequest()
	msg := append([]byte(req), edgelink.AppendHeader(nil, edgelink.KindOpen, 3, len(open))...)
	msg = append(msg, open...)
	if _, err := nc.Write(msg); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, want := make([]byte, 0, 512), "HTTP/1.1 101 Switching Protocols"
	buf := make([]byte, 512)
	for !strings.Contains(string(got), testAccept) {
		n, err := nc.Read(buf)
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		got = append(got, buf[:n]...)
	}
	if !strings.HasPrefix(string(got), want) || strings.Count(string(got), want) != 2 {
		t.Fatalf("got %q, want the link's 101 and the stream's", got)
	}
}

// TestLink_SlowEdge stops reading the link while the streams are sent far more than
// the sockets' buffers hold: what the socket does not take waits for the edge, which
// gets every frame, in order, once it reads again.
func TestLink_SlowEdge(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	h := newLinkHarness(t, func(s *ws.Server) { s.WriteTimeout = writeTimeout })
	l := h.dialLink(t)
	const streams, frames = 8, 24
	ss := make([]*testStream, streams)
	for i := range ss {
		ss[i] = l.welcomed(uint32(i + 1))
	}
	peers := h.game.Peers()
	l.paused.Lock()
	frame := make([]byte, 64<<10) // 12 MiB in all, under the pending bound
	for i := range frames {
		for _, p := range peers {
			frame := append([]byte{byte(i)}, frame...)
			if !p.Send(frame, true) {
				t.Fatal("a stream was dropped")
			}
		}
	}
	l.paused.Unlock()
	for _, s := range ss {
		for i := range frames {
			if _, m := s.frame(); len(m) != len(frame)+1 || m[0] != byte(i) {
				t.Fatalf("stream %d: frame %d has %d bytes, numbered %d", s.id, i, len(m), m[0])
			}
		}
	}
	// The blocking writes of the backlog had a deadline; once it has passed, the
	// link's writes go on as before.
	time.Sleep(writeTimeout + 100*time.Millisecond)
	for _, p := range peers {
		p.Send([]byte("after"), true)
	}
	for _, s := range ss {
		if _, m := s.frame(); string(m) != "after" {
			t.Fatalf("stream %d: after the write timeout got %q", s.id, m)
		}
	}
}

// TestLink_EdgeTooSlow stops reading the link for good while its streams are sent
// frames: what does not fit the link's backlog waits in each stream's queue, and each
// client whose queue fills is dropped, one by one, as a connection of its own whose
// socket filled would be; every session ends.
func TestLink_EdgeTooSlow(t *testing.T) {
	h := newLinkHarness(t, func(s *ws.Server) { s.SendQueue = 64 })
	l := h.dialLink(t)
	const streams = 8
	for i := range streams {
		l.welcomed(uint32(i + 1))
	}
	l.paused.Lock()
	defer l.paused.Unlock()
	frame := make([]byte, 64<<10)
	for _, p := range h.game.Peers() {
		for n := 0; p.Send(frame, true); n++ {
			if n > 10000 {
				t.Fatal("a client that can take nothing more was never dropped")
			}
		}
	}
	waitFor(t, "every session to end", func() bool { return h.game.Closed() == streams && h.srv.Active() == 0 })
}

// TestLink_BacklogWaitsInQueues: an edge that stops reading for a moment while its
// streams are sent more than the link may hold (40 MiB against 16) loses nothing:
// beyond the backlog, frames wait in each stream's queue, and every one arrives, in
// order, once the edge reads again.
func TestLink_BacklogWaitsInQueues(t *testing.T) {
	h := newLinkHarness(t, func(s *ws.Server) { s.SendQueue = 96 })
	l := h.dialLink(t)
	const streams, frames = 8, 80
	ss := make([]*testStream, streams)
	for i := range ss {
		ss[i] = l.welcomed(uint32(i + 1))
	}
	peers := h.game.Peers()
	l.paused.Lock()
	frame := make([]byte, 64<<10)
	for i := range frames {
		for _, p := range peers {
			if !p.Send(append([]byte{byte(i)}, frame...), true) {
				l.paused.Unlock()
				t.Fatal("a stream was dropped")
			}
		}
	}
	l.paused.Unlock()
	for _, s := range ss {
		for i := range frames {
			if _, m := s.frame(); len(m) != len(frame)+1 || m[0] != byte(i) {
				t.Fatalf("stream %d: frame %d has %d bytes, numbered %d", s.id, i, len(m), m[0])
			}
		}
	}
	if n := h.game.Closed(); n != 0 {
		t.Fatalf("%d sessions ended", n)
	}
}
