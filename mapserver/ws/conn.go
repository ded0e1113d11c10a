package ws

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// lingerTimeout bounds how long a closing connection waits for the client's side of the
// close handshake. Reading up to the client's close frame matters: closing a socket with
// unread input makes the kernel reset it, and a reset can destroy the error and close
// frames just written before the client reads them.
const lingerTimeout = time.Second

// urgentQueue bounds a connection's urgent lane (Reply): pongs and errors, a few at a
// time for a live client.
const urgentQueue = 16

// outFrame is one entry of a connection's send queue: a data frame, or the close frame
// that ends the connection after the frames queued before it (its code and reason are
// the connection's closeCode and closeText). It stays 32 bytes: every connection holds
// room for a full queue of them.
type outFrame struct {
	data   []byte
	binary bool
	close  bool
}

// conn is one player's connection. Its own goroutine is its only reader (run), and
// writeLoop writes what is queued; everything else talks to it through Send, Reply and
// Close, which never block. The reader also writes the replies to what it just read
// itself when no write is under way (see readLoop): wmu orders every data and close
// frame written.
type conn struct {
	s   *Server
	ws  *websocket.Conn
	log *slog.Logger

	queue      chan outFrame
	urgent     chan outFrame // small replies, written before anything in queue
	wake       chan struct{} // tells the writer the urgent lane has frames
	wmu        sync.Mutex    // held while a frame is written
	closeSent  bool          // under wmu: the close frame is written, nothing may follow
	quit       chan struct{} // closed by the reader when it is done
	writerDone chan struct{}
	dropped    atomic.Bool
	closing    atomic.Bool
	limit      *limiter
	buf        []byte // the reader's message buffer (read)
	// closeCode and closeText are written once, by the Close that wins closing, before
	// its frame is queued; the writer reads them after taking that frame.
	closeCode int
	closeText string

	helloTimeout, idleTimeout, writeTimeout time.Duration
}

var _ mapserver.Peer = (*conn)(nil)

func newConn(s *Server, ws *websocket.Conn) *conn {
	limit := s.ReadLimit
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	ws.SetReadLimit(limit)
	size := s.SendQueue
	if size <= 0 {
		size = DefaultSendQueue
	}
	return &conn{
		s: s, ws: ws, log: s.logger().With("remote", ws.RemoteAddr().String()),
		queue: make(chan outFrame, size), urgent: make(chan outFrame, urgentQueue), wake: make(chan struct{}, 1),
		quit: make(chan struct{}), writerDone: make(chan struct{}), limit: newLimiter(s.Limits),
		helloTimeout: orDuration(s.HelloTimeout, DefaultHelloTimeout),
		idleTimeout:  orDuration(s.IdleTimeout, DefaultIdleTimeout),
		writeTimeout: orDuration(s.WriteTimeout, DefaultWriteTimeout),
	}
}

// Send queues a frame without blocking. A full queue means the client does not read
// what it is sent: it is dropped, so that no sender ever waits for it. Frames sent after
// Close are discarded.
func (c *conn) Send(frame []byte, binary bool) bool {
	if c.dropped.Load() {
		return false
	}
	if c.closing.Load() {
		return !c.dropped.Load()
	}
	return c.enqueue(c.queue, outFrame{data: frame, binary: binary})
}

// Reply queues a small text frame in the urgent lane, which the writer empties before
// each frame of the send queue: a pong measures the network, not the backlog of
// snapshots ahead of it. A full lane drops the client, as a full queue does.
func (c *conn) Reply(frame []byte) bool {
	if c.dropped.Load() {
		return false
	}
	if c.closing.Load() {
		return !c.dropped.Load()
	}
	if !c.enqueue(c.urgent, outFrame{data: frame}) {
		return false
	}
	c.wakeWriter()
	return true
}

// wakeWriter tells the writer the urgent lane has frames, without blocking.
func (c *conn) wakeWriter() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Close queues the close frame; the connection ends once the client answers it or
// lingerTimeout passes.
func (c *conn) Close(code int, reason string) {
	if c.closing.CompareAndSwap(false, true) {
		c.closeCode, c.closeText = code, reason
		c.enqueue(c.queue, outFrame{close: true})
	}
}

// Remote is the client's address as the listener saw it (the edge's, behind it).
func (c *conn) Remote() string { return c.ws.RemoteAddr().String() }

func (c *conn) enqueue(q chan outFrame, f outFrame) bool {
	select {
	case q <- f:
		return true
	default:
		c.drop()
		return false
	}
}

// drop closes the socket at once: the reader and the writer both fail out of their
// blocking calls and the connection ends without a close handshake.
func (c *conn) drop() {
	if c.dropped.CompareAndSwap(false, true) {
		c.log.Warn("dropping a client whose send queue is full")
		c.ws.Close()
	}
}

// run serves the connection until it ends: it starts the writer, runs the handshake
// and the message loop, and tears down.
func (c *conn) run(ctx context.Context) {
	go c.writeLoop()
	if sess := c.handshake(ctx); sess != nil {
		c.readLoop(sess)
		sess.Closed()
	}
	close(c.quit)
	<-c.writerDone
	c.linger()
	c.ws.Close()
}

// handshake reads the first message and hands it to the Handshaker.
func (c *conn) handshake(ctx context.Context) mapserver.Session {
	_ = c.ws.SetReadDeadline(time.Now().Add(c.helloTimeout))
	typ, data, err := c.ws.ReadMessage()
	if err != nil {
		if isTimeout(err) {
			c.Send(wire.ErrorFrame("bad_request", "no hello within "+c.helloTimeout.String(), 0), false)
			c.Close(mapserver.ClosePolicy, "hello timeout")
		}
		return nil
	}
	return c.s.Handshaker.Hello(ctx, data, typ == websocket.BinaryMessage, c)
}

// readLoop hands every message to the session until the connection ends.
//
// The idle deadline is moved at most every idleTimeout/8 rather than per message:
// resetting it rearms a runtime timer, and every player sends a command per tick. It
// is set idleTimeout/8 beyond idleTimeout, so a client is closed after between
// idleTimeout and 9/8 idleTimeout of silence, never sooner.
func (c *conn) readLoop(sess mapserver.Session) {
	slack := c.idleTimeout / 8
	var set time.Time // when the deadline was last moved
	for {
		if now := time.Now(); now.Sub(set) >= slack {
			_ = c.ws.SetReadDeadline(now.Add(c.idleTimeout + slack))
			set = now
		}
		typ, data, err := c.read()
		if err != nil {
			if isTimeout(err) && !c.closing.Load() {
				c.Close(mapserver.CloseNormal, "idle timeout")
			}
			return
		}
		if c.closing.Load() {
			continue // closing: what the client still sends is read and ignored
		}
		now := time.Now()
		if reason := c.limit.allow(now, len(data)); reason != "" {
			c.refuse(now, reason)
			continue
		}
		sess.Receive(data, typ == websocket.BinaryMessage)
		c.replyNow()
	}
}

// replyNow writes what the message just received was answered with in the urgent lane
// (a pong, an error) from the reader itself, when no other write is under way: the
// reply then leaves as soon as it is made, instead of waiting for the writer goroutine
// to be scheduled, which on a busy map can take longer than the round trip a pong
// measures. Otherwise the writer, already woken, writes it.
func (c *conn) replyNow() {
	if len(c.urgent) == 0 || !c.wmu.TryLock() {
		return
	}
	defer c.wmu.Unlock()
	for !c.closeSent {
		select {
		case f := <-c.urgent:
			if !c.writeLocked(f) {
				return
			}
		default:
			return
		}
	}
}

// read reads the next message into the connection's buffer, which the next read
// reuses: a session does not keep what it is handed (mapserver.Session). Reading into
// one buffer instead of a fresh one per message spares the collector tens of thousands
// of small allocations a second on a busy map. The buffer keeps the size of the largest
// message read, at most the read limit.
func (c *conn) read() (int, []byte, error) {
	typ, r, err := c.ws.NextReader()
	if err != nil {
		return 0, nil, err
	}
	b := c.buf[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			c.buf = b
			return typ, b, nil
		}
		if err != nil {
			return 0, nil, err
		}
	}
}

// refuse answers a message over the limits with rate_limited instead of handing it to
// the session, and closes the connection with 1008 once refusals pile up. The error
// goes in the urgent lane when it has room; a flooder that does not read its errors
// loses some of them, never the connection for that.
func (c *conn) refuse(now time.Time, reason string) {
	c.s.counter(reason).Inc()
	msg := refusedMessage(reason, c.s.Limits)
	closing := c.limit.strike(now)
	if closing {
		msg += "; closing: too many messages refused"
	}
	select {
	case c.urgent <- outFrame{data: wire.ErrorFrame(wire.CodeRateLimited, msg, 0)}:
		c.wakeWriter()
	default:
	}
	if closing {
		c.s.counter(ReasonClosed).Inc()
		c.log.Info("closing a client that goes on over its rate limits", "reason", reason)
		c.Close(mapserver.ClosePolicy, wire.CodeRateLimited)
	}
}

// linger reads and discards what the client still sends after the server closed, up
// to the end of the stream or lingerTimeout (gorilla's reader may already be in a
// sticky error state, so it reads the raw socket).
func (c *conn) linger() {
	if !c.closing.Load() || c.dropped.Load() {
		return
	}
	nc := c.ws.NetConn()
	_ = nc.SetReadDeadline(time.Now().Add(lingerTimeout))
	_, _ = io.Copy(io.Discard, nc)
}

// writeLoop is the connection's only writer. When the reader is done it writes what is
// still queued (the error and close frames of a refused handshake) and returns.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	keepalive := time.NewTicker(c.idleTimeout / 2)
	defer keepalive.Stop()
	for {
		if !c.flushUrgent() {
			return
		}
		select {
		case <-c.wake: // flushUrgent, at the top of the loop, writes the lane
		case f := <-c.queue:
			if !c.write(f) {
				return
			}
		case <-keepalive.C:
			// Keeps idle middleboxes from forgetting the connection; the client's
			// automatic pong is not a message and does not count against idling.
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.writeTimeout)); err != nil {
				c.ws.Close()
				return
			}
		case <-c.quit:
			for c.flushUrgent() {
				select {
				case f := <-c.queue:
					if !c.write(f) {
						return
					}
				default:
					return
				}
			}
			return
		}
	}
}

// flushUrgent writes every frame waiting in the urgent lane, so a pong never waits
// behind queued snapshots; it reports whether the writer should go on.
func (c *conn) flushUrgent() bool {
	for {
		select {
		case f := <-c.urgent:
			if !c.write(f) {
				return false
			}
		default:
			return true
		}
	}
}

// write writes one frame and reports whether the writer should go on.
func (c *conn) write(f outFrame) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(f)
}

// writeLocked is write with wmu held.
func (c *conn) writeLocked(f outFrame) bool {
	if c.dropped.Load() || c.closeSent {
		return false
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(c.writeTimeout))
	if f.close {
		c.closeSent = true
		_ = c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(c.closeCode, c.closeText))
		// Wake the reader if the client never answers the close.
		_ = c.ws.NetConn().SetReadDeadline(time.Now().Add(lingerTimeout))
		return false
	}
	typ := websocket.TextMessage
	if f.binary {
		typ = websocket.BinaryMessage
	}
	if err := c.ws.WriteMessage(typ, f.data); err != nil {
		c.log.Debug("write failed", "err", err)
		c.ws.Close() // unblocks the reader
		return false
	}
	return true
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
