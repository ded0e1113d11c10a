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

// outFrame is one entry of a connection's lanes: a frame's opcode and payload (the
// close frame's payload is its code and reason). It stays 32 bytes: every connection
// holds room for full lanes of them.
type outFrame struct {
	data []byte
	op   byte
}

// conn is one player's connection. Its own goroutine is its only reader (run); the
// Server's flusher writes what is queued (flush.go). Everything else talks to it
// through Send, Reply and Close, which never block.
type conn struct {
	s   *Server
	ws  *websocket.Conn
	raw rawConn // the socket's non-blocking writev; nil: every write takes the slow path
	log *slog.Logger

	queue     chan outFrame
	urgent    chan outFrame // small replies and control frames, written before queue's
	scheduled atomic.Bool   // in the flusher's list
	dropped   atomic.Bool
	closing   atomic.Bool
	lastWrite atomic.Int64 // unix nanoseconds of the last write, for keepalive pings
	limit     *limiter
	buf       []byte // the reader's message buffer (read)

	// wmu orders every write. The flusher and the reader hold it only to take frames
	// and make one non-blocking write; while slow is set, drainSlow (or, at the end,
	// finish, which never clears it) alone writes.
	wmu       sync.Mutex
	slowDone  *sync.Cond // on wmu: broadcast when slow clears
	slow      bool       // a goroutine is writing what the socket did not take
	pending   []byte     // what the socket did not take, for drainSlow
	closeSent bool       // the close frame is taken: nothing may follow it

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
	c := &conn{
		s: s, ws: ws, raw: newRawConn(ws.NetConn()), log: s.logger().With("remote", ws.RemoteAddr().String()),
		queue: make(chan outFrame, size), urgent: make(chan outFrame, urgentQueue),
		limit:        newLimiter(s.Limits),
		helloTimeout: orDuration(s.HelloTimeout, DefaultHelloTimeout),
		idleTimeout:  orDuration(s.IdleTimeout, DefaultIdleTimeout),
		writeTimeout: orDuration(s.WriteTimeout, DefaultWriteTimeout),
	}
	c.slowDone = sync.NewCond(&c.wmu)
	c.lastWrite.Store(time.Now().UnixNano())
	// gorilla's own handlers would answer pings and closes with writes of their own,
	// beside the flusher's: the answers go through the urgent lane instead.
	ws.SetPingHandler(func(data string) error {
		c.offer(opPong, []byte(data))
		return nil
	})
	ws.SetCloseHandler(func(code int, _ string) error {
		if code == websocket.CloseNoStatusReceived {
			code = websocket.CloseNormalClosure
		}
		c.Close(code, "")
		return nil
	})
	return c
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
	op := byte(opText)
	if binary {
		op = opBinary
	}
	return c.enqueue(c.queue, outFrame{data: frame, op: op})
}

// Reply queues a small text frame in the urgent lane, which is written before anything
// in the send queue: a pong measures the network, not the backlog of snapshots ahead of
// it. A full lane drops the client, as a full queue does.
func (c *conn) Reply(frame []byte) bool {
	if c.dropped.Load() {
		return false
	}
	if c.closing.Load() {
		return !c.dropped.Load()
	}
	return c.enqueue(c.urgent, outFrame{data: frame, op: opText})
}

// offer queues a frame the connection can do without (a ping, the pong to a client's
// ping, a rate_limited error) in the urgent lane; a full lane loses the frame, not the
// connection.
func (c *conn) offer(op byte, data []byte) {
	if c.dropped.Load() || c.closing.Load() {
		return
	}
	select {
	case c.urgent <- outFrame{data: data, op: op}:
		c.schedule()
	default:
	}
}

// Close queues the close frame; the connection ends once the client answers it or
// lingerTimeout passes.
func (c *conn) Close(code int, reason string) {
	if c.closing.CompareAndSwap(false, true) {
		c.enqueue(c.queue, outFrame{data: websocket.FormatCloseMessage(code, reason), op: opClose})
	}
}

// Remote is the client's address as the listener saw it (the edge's, behind it).
func (c *conn) Remote() string { return c.ws.RemoteAddr().String() }

func (c *conn) enqueue(q chan outFrame, f outFrame) bool {
	select {
	case q <- f:
		c.schedule()
		return true
	default:
		c.drop()
		return false
	}
}

// schedule puts the connection in the flusher's next pass, once.
func (c *conn) schedule() {
	if c.scheduled.CompareAndSwap(false, true) {
		c.s.flusher.add(c)
	}
}

// drop closes the socket at once: the reader and any write fail out of their calls
// and the connection ends without a close handshake.
func (c *conn) drop() {
	if c.dropped.CompareAndSwap(false, true) {
		c.log.Warn("dropping a client whose send queue is full")
		c.ws.Close()
	}
}

// run serves the connection until it ends: the handshake, the message loop, then what
// is still queued (the error and close frames of a refused handshake) and the close.
//
// The message loop runs on a fresh goroutine: the handshake's stack grew deep (the
// ticket's redemption is an HTTP call) and a goroutine keeps its stack's size while
// it lives, which for a connection is the whole session. done runs when the
// connection has ended.
func (c *conn) run(ctx context.Context, done func()) {
	sess := c.handshake(ctx)
	if sess == nil {
		c.end()
		done()
		return
	}
	go func() {
		c.readLoop(sess)
		sess.Closed()
		c.end()
		done()
	}()
}

// end writes what is still queued and the close, and closes the socket.
func (c *conn) end() {
	c.finish()
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
			c.replyNow()
			continue
		}
		sess.Receive(data, typ == websocket.BinaryMessage)
		c.replyNow()
	}
}

// replyNow writes what the message just received was answered with (a pong, an
// error) from the reader itself, with whatever else is queued: the reply leaves as soon
// as it is made, instead of waiting for the flusher's next pass, which on a busy map can
// take longer than the round trip a pong measures, and answers leave in the order of
// the messages they answer.
func (c *conn) replyNow() {
	if len(c.urgent)+len(c.queue) == 0 {
		return
	}
	b := batchPool.Get().(*batch)
	c.flush(b)
	batchPool.Put(b)
}

var batchPool = sync.Pool{New: func() any { return new(batch) }}

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
	c.offer(opText, wire.ErrorFrame(wire.CodeRateLimited, msg, 0))
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

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
