package ws

import (
	"log/slog"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// urgentQueue bounds a player's urgent lane (Reply): pongs and errors, a few at a time
// for a live client.
const urgentQueue = 16

// invalidTextReason is the reason of the close (1007) of a connection whose text
// message is not valid UTF-8.
const invalidTextReason = "text message is not valid UTF-8"

// validMessage reports whether a client message of opcode op may be handed on: a text
// message must be valid UTF-8, and a connection that sends one that is not is failed
// with 1007 (RFC 6455 section 8.1) by both transports, rather than answered like a
// malformed message, since no endpoint may act on it.
func validMessage(op byte, data []byte) bool { return op != opText || utf8.Valid(data) }

// outFrame is one entry of a player's lanes: a frame's opcode and payload (the close
// frame's payload is its code and reason). It stays 32 bytes: every player holds room
// for full lanes of them.
type outFrame struct {
	data []byte
	op   byte
}

// writer is what the flusher and the keepalive sweep know of a player's connection,
// whatever carries it: a WebSocket of its own (conn) or a stream of a link (stream).
type writer interface {
	base() *peer
	// flushTo writes, or hands to the link's output, what the lanes hold; it runs on
	// the flusher's goroutine.
	flushTo(f *flusher)
	// drop ends the connection at once, without a close handshake.
	drop()
}

// peer is what every player connection shares, whatever carries it: the lanes the game
// queues frames on, the flags of its end, its rate limits and timeouts. Send, Reply,
// offer and Close never block.
type peer struct {
	s    *Server
	self writer // the conn or stream this peer is part of
	log  *slog.Logger

	queue     chan outFrame
	urgent    chan outFrame // small replies and control frames, written before queue's
	scheduled atomic.Bool   // in the flusher's list
	dropped   atomic.Bool
	closing   atomic.Bool
	lastWrite atomic.Int64 // unix nanoseconds of the last write, for keepalive pings
	limit     *limiter     // only the reader of the messages uses it

	// closeSent: the close frame is taken, nothing may follow it. Guarded by the
	// owner's write lock (conn.wmu, link.wmu).
	closeSent bool

	helloTimeout, idleTimeout, writeTimeout time.Duration
}

func (p *peer) init(s *Server, self writer, log *slog.Logger) {
	size := s.SendQueue
	if size <= 0 {
		size = DefaultSendQueue
	}
	p.s, p.self, p.log = s, self, log
	p.queue, p.urgent = make(chan outFrame, size), make(chan outFrame, urgentQueue)
	p.limit = newLimiter(s.Limits)
	p.helloTimeout = orDuration(s.HelloTimeout, DefaultHelloTimeout)
	p.idleTimeout = orDuration(s.IdleTimeout, DefaultIdleTimeout)
	p.writeTimeout = orDuration(s.WriteTimeout, DefaultWriteTimeout)
	p.lastWrite.Store(time.Now().UnixNano())
}

func (p *peer) base() *peer { return p }

// Send queues a frame without blocking. A full queue means the client does not read
// what it is sent: it is dropped, so that no sender ever waits for it. Frames sent after
// Close are discarded.
func (p *peer) Send(frame []byte, binary bool) bool {
	if p.dropped.Load() {
		return false
	}
	if p.closing.Load() {
		return !p.dropped.Load()
	}
	op := byte(opText)
	if binary {
		op = opBinary
	}
	return p.enqueue(p.queue, outFrame{data: frame, op: op})
}

// Reply queues a small text frame in the urgent lane, which is written before anything
// in the send queue: a pong measures the network, not the backlog of snapshots ahead of
// it. A full lane drops the client, as a full queue does.
func (p *peer) Reply(frame []byte) bool {
	if p.dropped.Load() {
		return false
	}
	if p.closing.Load() {
		return !p.dropped.Load()
	}
	return p.enqueue(p.urgent, outFrame{data: frame, op: opText})
}

// offer queues a frame the connection can do without (a ping, the pong to a client's
// ping, a rate_limited error) in the urgent lane; a full lane loses the frame, not the
// connection.
func (p *peer) offer(op byte, data []byte) {
	if p.dropped.Load() || p.closing.Load() {
		return
	}
	select {
	case p.urgent <- outFrame{data: data, op: op}:
		p.schedule()
	default:
	}
}

// Close queues the close frame after what is already queued; the connection ends once
// it is written (and, for a conn, the client answers it or lingerTimeout passes).
func (p *peer) Close(code int, reason string) {
	if p.closing.CompareAndSwap(false, true) {
		p.enqueue(p.queue, outFrame{data: websocket.FormatCloseMessage(code, reason), op: opClose})
	}
}

func (p *peer) enqueue(q chan outFrame, f outFrame) bool {
	select {
	case q <- f:
		p.schedule()
		return true
	default:
		p.self.drop()
		return false
	}
}

// schedule puts the connection in the flusher's next pass, once.
func (p *peer) schedule() {
	if p.scheduled.CompareAndSwap(false, true) {
		p.s.flusher.add(p.self)
	}
}

// queued is the number of frames waiting in the lanes.
func (p *peer) queued() int { return len(p.urgent) + len(p.queue) }

// take moves frames from the lanes into b, urgent first, up to one flush's bounds or
// the close frame (or a stream's move), which ends the batch and marks the peer
// closeSent. Held: the owner's write lock.
func (p *peer) take(b *batch) {
	b.reset()
	for n := 0; n < flushFrames && b.size < flushBytes && !b.close; n++ {
		var f outFrame
		select {
		case f = <-p.urgent:
		default:
			select {
			case f = <-p.queue:
			default:
				return
			}
		}
		if f.op == opMove {
			// Nothing follows a move either; its record goes after the batch's frames.
			b.move, b.close, p.closeSent = f.data, true, true
			return
		}
		b.add(f.op, f.data)
		if f.op == opClose {
			b.close, p.closeSent = true, true
		}
	}
}

// admit takes a message of size bytes through the rate limits after the hello; a
// message over them is refused (refuse) and must not reach the session.
func (p *peer) admit(now time.Time, size int) bool {
	if reason := p.limit.allow(now, size); reason != "" {
		p.refuse(now, reason)
		return false
	}
	return true
}

// refuse answers a message over the limits with rate_limited instead of handing it to
// the session, and closes the connection with 1008 once refusals pile up. The error
// goes in the urgent lane when it has room; a flooder that does not read its errors
// loses some of them, never the connection for that.
func (p *peer) refuse(now time.Time, reason string) {
	p.s.counter(reason).Inc()
	msg := refusedMessage(reason, p.s.Limits)
	closing := p.limit.strike(now)
	if closing {
		msg += "; closing: too many messages refused"
	}
	p.offer(opText, wire.ErrorFrame(wire.CodeRateLimited, msg, 0))
	if closing {
		p.s.counter(ReasonClosed).Inc()
		p.log.Info("closing a client that goes on over its rate limits", "reason", reason)
		p.Close(mapserver.ClosePolicy, wire.CodeRateLimited)
	}
}

// helloTimedOut answers a connection that sent no first message within the hello
// timeout.
func (p *peer) helloTimedOut() {
	p.Send(wire.ErrorFrame("bad_request", "no hello within "+p.helloTimeout.String(), 0), false)
	p.Close(mapserver.ClosePolicy, "hello timeout")
}
