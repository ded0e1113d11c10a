package ws

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/kernel/rawio"
)

// lingerTimeout bounds how long a closing connection waits for the client's side of the
// close handshake. Reading up to the client's close frame matters: closing a socket with
// unread input makes the kernel reset it, and a reset can destroy the error and close
// frames just written before the client reads them.
const lingerTimeout = time.Second

// conn is one player's connection. Its own goroutine is its only reader (run); the
// Server's flusher writes what is queued (flush.go). Everything else talks to it
// through Send, Reply and Close (peer), which never block.
type conn struct {
	peer
	ws  *websocket.Conn
	raw *rawio.Conn // the socket's non-blocking writev; nil: every write takes the slow path
	buf []byte      // the reader's message buffer (read)

	// wmu orders every write. The flusher and the reader hold it only to take frames
	// and make one non-blocking write; while slow is set, drainSlow (or, at the end,
	// finish, which never clears it) alone writes.
	wmu      sync.Mutex
	slowDone *sync.Cond // on wmu: broadcast when slow clears
	slow     bool       // a goroutine is writing what the socket did not take
	pending  []byte     // what the socket did not take, for drainSlow
}

var _ mapserver.Peer = (*conn)(nil)

func newConn(s *Server, ws *websocket.Conn) *conn {
	// No limit of gorilla's own: on a message over it, gorilla would write its close
	// frame itself, beside the flusher, and close with the rest of the message unread
	// (a reset that can destroy that frame). read enforces the limit instead.
	ws.SetReadLimit(0)
	c := &conn{ws: ws, raw: rawio.New(ws.NetConn())}
	c.init(s, c, s.logger().With("remote", ws.RemoteAddr().String()))
	c.slowDone = sync.NewCond(&c.wmu)
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

// Remote is the client's address as the listener saw it (the edge's, behind it).
func (c *conn) Remote() string { return c.ws.RemoteAddr().String() }

func (c *conn) flushTo(f *flusher) { c.flush(&f.b) }

// Move is false: a WebSocket of its own ends where it was accepted, so nothing can
// carry it on to another container.
func (c *conn) Move(string, []byte) bool { return false }

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
	typ, data, err := c.read()
	if err != nil {
		if isTimeout(err) {
			c.helloTimedOut()
		}
		return nil
	}
	// The Handshaker may keep its first message; the buffer is the next read's.
	first := append([]byte(nil), data...)
	return c.s.Handshaker.Hello(ctx, first, typ == websocket.BinaryMessage, c)
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
		if now := time.Now(); now.Sub(set) >= slack && !c.closing.Load() {
			_ = c.ws.SetReadDeadline(now.Add(c.idleTimeout + slack))
			set = now
			// A close frame written since the check set the linger deadline, which
			// this one may have replaced.
			if c.closing.Load() {
				_ = c.ws.SetReadDeadline(time.Now().Add(lingerTimeout))
			}
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
		if !c.admit(time.Now(), len(data)) {
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
	if c.queued() == 0 {
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
//
// A message is refused whole, the connection closed and the error errRefused returned,
// when its fragments add up to more than the read limit (1009) or it is a text message
// that is not valid UTF-8 (1007), as the link's streams do (frames.go).
func (c *conn) read() (int, []byte, error) {
	typ, r, err := c.ws.NextReader()
	if err != nil {
		return 0, nil, err
	}
	limit := int(c.s.readLimit())
	b := c.buf[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):min(cap(b), limit+1)])
		b = b[:len(b)+n]
		if len(b) > limit {
			c.buf = b[:0]
			c.Close(mapserver.CloseTooBig, "")
			return 0, nil, errRefused
		}
		if err == io.EOF {
			c.buf = b
			if !validMessage(byte(typ), b) {
				c.Close(mapserver.CloseInvalidPayload, invalidTextReason)
				return 0, nil, errRefused
			}
			return typ, b, nil
		}
		if err != nil {
			return 0, nil, err
		}
	}
}

// errRefused is read's error for a message it refused and closed the connection for.
var errRefused = errors.New("ws: message refused")

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
