package ws

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
)

// Bounds of the messages a stream keeps while its hello is being answered. A client
// plays once it has its welcome, which the tick sends before the Handshaker returns:
// on a busy map that can be a few ticks, a few of a playing client's messages (30
// inputs a second and its acks). The bounds leave a second of that; one more closes
// the stream with 1008.
const (
	earlyMessages = 64
	earlyBytes    = 16 << 10
)

// wsGUID is what a WebSocket accept key is derived with (RFC 6455, section 4.2.2).
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// stream is one player's connection carried by a link: a mapserver.Peer like conn,
// whose bytes travel in the link's records. The link's reader parses its frames
// (frames.go) and hands its messages on; the flusher appends its frames to the link's
// output.
//
// Receive never runs twice at once for a stream: the reader and the goroutine that
// answers the hello (which delivers the messages that arrived meanwhile) both hand
// messages on while holding rmu. A mutex rather than handing the session back to the
// reader: the reader sleeps in the link's read, and the hello's answer must not wait
// for the next record of the stream.
type stream struct {
	peer
	l      *edgeLink
	id     uint32
	remote string

	// The reader's alone.
	partial []byte // the start of a frame whose end is in a later record
	msg     []byte // a fragmented message being put together; reused
	msgOp   byte   // the opcode of that message's first frame, 0 between messages
	broken  bool   // a protocol error or a close frame: what follows is not read
	touched bool   // in the link's list of streams a read gave bytes to
	waiting bool   // in the link's list of streams waiting for its backlog (l.wmu)

	lastRead atomic.Int64 // unix nanoseconds of the last message, for the idle sweep
	live     atomic.Bool  // a session is serving it
	timer    *time.Timer  // the hello timeout

	rmu      sync.Mutex
	sess     mapserver.Session
	greeted  bool // the first message arrived (or the hello timed out)
	helloing bool // the Handshaker has the first message
	ended    bool
	early    []earlyMessage
	earlyLen int
}

type earlyMessage struct {
	data   []byte
	binary bool
}

var _ mapserver.Peer = (*stream)(nil)

// Remote is the player's address as the edge forwarded it (X-Forwarded-For), else the
// link's.
func (st *stream) Remote() string { return st.remote }

// open answers a stream's upgrade request, as the WebSocket upgrade of a connection of
// its own would: a refusal (403 for another site's origin, 400 for anything else) is
// one Data record with the HTTP response and a Close record; an accepted stream's first
// Data record is the 101 response. Only the link's reader calls it.
func (l *edgeLink) open(id uint32, payload []byte) {
	if l.stream(id) != nil {
		l.log.Warn("link opened a stream twice", "stream", id)
		return
	}
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(payload)))
	if err != nil {
		l.refuseStream(id, http.StatusBadRequest, apierr.EBADREQUEST, "not an HTTP request")
		return
	}
	if msg := badUpgrade(r); msg != "" {
		l.refuseStream(id, http.StatusBadRequest, apierr.EBADREQUEST, msg)
		return
	}
	if !l.s.checkOrigin(r) {
		l.log.Debug("stream refused: origin", "stream", id, "origin", r.Header.Get("Origin"))
		l.refuseStream(id, http.StatusForbidden, apierr.EFORBIDDEN, "origin not allowed")
		return
	}
	st := &stream{l: l, id: id, remote: l.remote}
	if xff := r.Header.Get("X-Forwarded-For"); xff != "" {
		first, _, _ := strings.Cut(xff, ",")
		st.remote = strings.TrimSpace(first)
	}
	st.init(l.s, st, l.s.logger().With("remote", st.remote, "stream", id))
	st.lastRead.Store(time.Now().UnixNano())

	accept := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + wsGUID))
	resp := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
		base64.StdEncoding.EncodeToString(accept[:]) + "\r\n\r\n"
	// The 101 is in the output before anything else can be written for the stream.
	l.wmu.Lock()
	l.out = edgelink.AppendHeader(l.out, edgelink.KindData, id, len(resp))
	l.out = append(l.out, resp...)
	l.wmu.Unlock()

	st.timer = time.AfterFunc(st.helloTimeout, st.noHello)
	l.mu.Lock()
	l.streams[id] = st
	l.mu.Unlock()
	l.s.track(st, 1)
}

// badUpgrade says what makes r no WebSocket upgrade request, or "".
func badUpgrade(r *http.Request) string {
	switch {
	case r.Method != http.MethodGet:
		return "a WebSocket upgrade is a GET"
	case !httpkit.HeaderHasToken(r.Header, "Connection", "upgrade"):
		return "missing Connection: Upgrade"
	case !httpkit.HeaderHasToken(r.Header, "Upgrade", "websocket"):
		return "missing Upgrade: websocket"
	case r.Header.Get("Sec-WebSocket-Version") != "13":
		return "unsupported Sec-WebSocket-Version (13 expected)"
	case r.Header.Get("Sec-WebSocket-Key") == "":
		return "missing Sec-WebSocket-Key"
	}
	return ""
}

// refusal is a complete HTTP error response with the JSON error envelope of every
// mapyard listener, for a stream that is closed after it.
func refusal(status int, code, msg string) []byte {
	body := errorBody(code, msg)
	return []byte("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) +
		"\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + string(body))
}

// errorBody is the JSON error envelope every mapyard listener answers errors with.
func errorBody(code, msg string) []byte {
	b, _ := json.Marshal(httpkit.ErrorResponse{Error: apierr.Error{Code: code, Message: msg}})
	return b
}

// refuseStream answers a refused upgrade and ends the stream.
func (l *edgeLink) refuseStream(id uint32, status int, code, msg string) {
	resp := refusal(status, code, msg)
	l.wmu.Lock()
	l.out = edgelink.AppendHeader(l.out, edgelink.KindData, id, len(resp))
	l.out = append(l.out, resp...)
	l.out = edgelink.AppendHeader(l.out, edgelink.KindClose, id, 0)
	l.wmu.Unlock()
}

// message hands on one message of the client: the first to the Handshaker, on a
// goroutine of its own (redeeming a ticket is an HTTP call, and the link's other
// streams must not wait for it); those that arrive while it runs are kept, copied, and
// delivered after it; later ones go through the rate limits to the session. data is
// valid only during the call.
func (st *stream) message(data []byte, binary bool) {
	now := time.Now()
	st.lastRead.Store(now.UnixNano())
	st.rmu.Lock()
	defer st.rmu.Unlock()
	switch {
	case st.ended || st.closing.Load():
		// Closing: what the client still sends is ignored.
	case !st.greeted:
		st.greeted, st.helloing = true, true
		st.timer.Stop()
		go st.hello(append([]byte(nil), data...), binary)
	case st.helloing:
		if len(st.early) == earlyMessages || st.earlyLen+len(data) > earlyBytes {
			st.early = nil
			st.Close(mapserver.ClosePolicy, "too many messages before the welcome")
			return
		}
		st.early = append(st.early, earlyMessage{data: append([]byte(nil), data...), binary: binary})
		st.earlyLen += len(data)
	case st.sess != nil:
		if st.admit(now, len(data)) {
			st.sess.Receive(data, binary)
		}
	}
}

// hello runs the Handshaker, then delivers what arrived meanwhile. A stream that ended
// while it ran learns it now: its session is closed at once.
func (st *stream) hello(first []byte, binary bool) {
	sess := st.s.Handshaker.Hello(st.l.ctx, first, binary, st)
	st.rmu.Lock()
	st.helloing = false
	if st.ended {
		st.rmu.Unlock()
		if sess != nil {
			sess.Closed()
		}
		st.s.track(st, -1)
		return
	}
	early := st.early
	st.early, st.earlyLen = nil, 0
	if sess == nil {
		// The Handshaker refused the stream and closed it (else it is closed here).
		st.rmu.Unlock()
		st.Close(mapserver.ClosePolicy, "")
		return
	}
	st.sess = sess
	st.lastRead.Store(time.Now().UnixNano())
	st.live.Store(true)
	for _, m := range early {
		if st.closing.Load() {
			break
		}
		if st.admit(time.Now(), len(m.data)) {
			sess.Receive(m.data, m.binary)
		}
	}
	st.rmu.Unlock()
}

// noHello closes a stream that sent no first message within the hello timeout.
func (st *stream) noHello() {
	st.rmu.Lock()
	late := !st.greeted && !st.ended
	st.greeted = true
	st.rmu.Unlock()
	if late {
		st.helloTimedOut()
	}
}

// idle reports whether a stream with a session has been sent nothing for longer than
// the idle timeout; the sweep closes it.
func (st *stream) idle(now time.Time) bool {
	return st.live.Load() && !st.closing.Load() &&
		now.UnixNano()-st.lastRead.Load() > int64(st.idleTimeout)
}

// end ends the stream once, whatever ended it (its close frame written, the edge's
// Close record, a drop, the link's end): it leaves the link, and its session learns it
// ended. While the Handshaker still has the first message, hello finishes the end when
// it returns.
func (st *stream) end() {
	st.rmu.Lock()
	if st.ended {
		st.rmu.Unlock()
		return
	}
	st.ended = true
	sess, helloing := st.sess, st.helloing
	st.sess, st.early = nil, nil
	st.rmu.Unlock()
	st.timer.Stop()
	st.l.forget(st)
	if helloing {
		return
	}
	if sess != nil {
		sess.Closed()
	}
	st.s.track(st, -1)
}

// Move ends the stream with a KindMove record after the frames already queued, its
// payload the edgelink.Move of generation and hello: the edge opens the client's
// connection again at that generation, which stays open. False when the edge does not
// read moves, hello is not JSON, or the stream is closing or dropped.
func (st *stream) Move(generation string, hello []byte) bool {
	if !st.l.move || st.dropped.Load() {
		return false
	}
	payload, err := json.Marshal(edgelink.Move{Generation: generation, Hello: hello})
	if err != nil {
		st.log.Warn("move not sent", "err", err)
		return false
	}
	if !st.closing.CompareAndSwap(false, true) {
		return false
	}
	return st.enqueue(st.queue, outFrame{data: payload, op: opMove})
}

// closedByEdge ends a stream the edge closed: nothing more is written for it.
func (st *stream) closedByEdge() {
	st.closing.Store(true)
	st.l.wmu.Lock()
	st.closeSent = true
	st.l.wmu.Unlock()
	st.end()
}

// drop ends the stream at once, without a close handshake: the edge is told with a
// Close record. It never ends the stream on the caller's goroutine, which may be the
// tick (a full queue) or the session's Receive.
func (st *stream) drop() {
	if !st.dropped.CompareAndSwap(false, true) {
		return
	}
	st.log.Warn("dropping a client whose send queue is full")
	l := st.l
	l.wmu.Lock()
	if !st.closeSent {
		st.closeSent = true
		l.out = edgelink.AppendHeader(l.out, edgelink.KindClose, st.id, 0)
	}
	l.writeLocked()
	l.wmu.Unlock()
	go st.end()
}

// flushTo appends what the lanes hold to the link's output; the flusher writes every
// link it appended to after its pass.
func (st *stream) flushTo(f *flusher) {
	l := st.l
	l.wmu.Lock()
	closed := l.take(st, &f.b)
	l.wmu.Unlock()
	if !l.inPass {
		l.inPass = true
		f.links = append(f.links, l)
	}
	if closed {
		f.ended = append(f.ended, st)
	}
}
