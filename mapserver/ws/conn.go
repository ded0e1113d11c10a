package ws

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/orchestrator/apierr"
	"github.com/mapyard/mapyard/orchestrator/control"
)

// Close codes the server ends a connection with, besides gorilla's own 1009 for a frame
// over the read limit.
const (
	// ClosePolicy ends a connection whose handshake failed: no hello, a bad hello, or a
	// ticket the orchestrator refused (the error frame before it says which).
	ClosePolicy = websocket.ClosePolicyViolation
	// CloseTryAgain ends a connection the map cannot take yet (map_unavailable).
	CloseTryAgain = websocket.CloseTryAgainLater
	// CloseIdle ends a connection that sent nothing for the idle timeout.
	CloseIdle = websocket.CloseNormalClosure
)

// lingerTimeout bounds how long a closing connection waits for the client's side of the
// close handshake, so the close frame is read before the socket goes away.
const lingerTimeout = time.Second

// outFrame is one entry of a connection's send queue: a text frame, or the close frame
// that ends the connection after the frames queued before it.
type outFrame struct {
	data      []byte
	close     bool
	closeCode int
	closeText string
}

// conn is one player's connection. The goroutine of ServeHTTP is its only reader
// (run), writeLoop its only writer; everything else talks to it through send, which
// never blocks.
type conn struct {
	s   *Server
	ws  *websocket.Conn
	log *slog.Logger

	queue      chan outFrame
	quit       chan struct{} // closed by the reader when it is done
	writerDone chan struct{}
	dropped    atomic.Bool

	helloTimeout, idleTimeout, writeTimeout time.Duration
}

func newConn(s *Server, ws *websocket.Conn) *conn {
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ws.SetReadLimit(s.ReadLimit)
	if s.ReadLimit <= 0 {
		ws.SetReadLimit(DefaultReadLimit)
	}
	size := s.SendQueue
	if size <= 0 {
		size = DefaultSendQueue
	}
	return &conn{
		s: s, ws: ws, log: log.With("remote", ws.RemoteAddr().String()),
		queue: make(chan outFrame, size), quit: make(chan struct{}), writerDone: make(chan struct{}),
		helloTimeout: orDuration(s.HelloTimeout, DefaultHelloTimeout),
		idleTimeout:  orDuration(s.IdleTimeout, DefaultIdleTimeout),
		writeTimeout: orDuration(s.WriteTimeout, DefaultWriteTimeout),
	}
}

// send queues a text frame without blocking. A full queue means the client does not
// read what it is sent: it is dropped, so that no sender ever waits for it.
func (c *conn) send(frame []byte) bool {
	return c.enqueue(outFrame{data: frame})
}

func (c *conn) enqueue(f outFrame) bool {
	select {
	case c.queue <- f:
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

// run serves the connection until it ends: it starts the writer, reads, and tears down.
func (c *conn) run() {
	go c.writeLoop()
	welcomed, code, text := c.read()
	if welcomed {
		c.s.leave(c)
	}
	if code != 0 {
		c.enqueue(outFrame{close: true, closeCode: code, closeText: text})
	}
	close(c.quit)
	<-c.writerDone
	if !c.dropped.Load() {
		c.linger()
	}
	c.ws.Close()
}

// linger reads and discards what the client still sends, up to its close frame and
// the end of the stream or lingerTimeout. Closing a socket with unread input makes the
// kernel reset it, and a reset can destroy the error and close frames just written
// before the client reads them.
func (c *conn) linger() {
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
		select {
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
			for {
				select {
				case f := <-c.queue:
					if !c.write(f) {
						return
					}
				default:
					return
				}
			}
		}
	}
}

// write writes one frame and reports whether the writer should go on.
func (c *conn) write(f outFrame) bool {
	if c.dropped.Load() {
		return false
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(c.writeTimeout))
	if f.close {
		_ = c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(f.closeCode, f.closeText))
		return false
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, f.data); err != nil {
		c.log.Debug("write failed", "err", err)
		c.ws.Close() // unblocks the reader
		return false
	}
	return true
}

func (c *conn) sendError(code, msg string) {
	c.send(errorFrame(code, msg))
}

// read runs the handshake and then the message loop. It returns whether the player was
// welcomed, and the close code (0 for none) the server ends the connection with.
func (c *conn) read() (welcomed bool, code int, text string) {
	_ = c.ws.SetReadDeadline(time.Now().Add(c.helloTimeout))
	typ, data, err := c.ws.ReadMessage()
	if err != nil {
		if isTimeout(err) {
			c.sendError(apierr.EBADREQUEST, "no hello within "+c.helloTimeout.String())
			return false, ClosePolicy, "hello timeout"
		}
		return false, 0, ""
	}
	var in Inbound
	if typ != websocket.TextMessage || json.Unmarshal(data, &in) != nil || in.V != Version || in.Kind != KindHello || in.Ticket == "" {
		c.sendError(apierr.EBADREQUEST, `the first message must be {"v":1,"kind":"hello","ticket":"..."}`)
		return false, ClosePolicy, "expected hello"
	}
	w, err := c.admit(in.Ticket)
	if err != nil {
		code, msg := apierr.Code(err), apierr.Message(err)
		c.log.Info("player refused", "code", code)
		c.sendError(code, msg)
		if code == apierr.EMAPUNAVAILABLE {
			return false, CloseTryAgain, code
		}
		return false, ClosePolicy, code
	}
	frame, err := json.Marshal(w)
	if err != nil {
		c.sendError(apierr.EINTERNAL, "internal error")
		return false, websocket.CloseInternalServerErr, "internal"
	}
	// Counted before the welcome leaves, so a client that sees its welcome sees itself
	// counted too.
	c.s.join(c)
	sent := c.send(frame)
	if w.TransferID != "" {
		go c.reportTransfer(w, sent)
	}
	if !sent {
		return true, 0, ""
	}
	c.log.Info("player welcomed", "character", w.CharacterID, "epoch", w.Epoch)

	for {
		_ = c.ws.SetReadDeadline(time.Now().Add(c.idleTimeout))
		typ, data, err := c.ws.ReadMessage()
		if err != nil {
			if isTimeout(err) {
				return true, CloseIdle, "idle timeout"
			}
			return true, 0, ""
		}
		c.handle(typ, data)
	}
}

// admit waits briefly for the world, then redeems the ticket for this map. The world
// comes first so that a ticket is not used up on a map that cannot welcome its player.
func (c *conn) admit(ticket string) (*Welcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), orDuration(c.s.WorldWait, DefaultWorldWait))
	cfg, hash, ok := c.s.World.Wait(ctx)
	cancel()
	if !ok {
		return nil, apierr.Errorf(apierr.EMAPUNAVAILABLE, "the map is not ready yet; join again")
	}
	ctx, cancel = context.WithTimeout(context.Background(), orDuration(c.s.RedeemWait, DefaultRedeemWait))
	defer cancel()
	res, err := c.s.Redeemer.Redeem(ctx, control.RedeemRequest{InstanceID: cfg.InstanceID, Token: ticket})
	if err != nil {
		var e *apierr.Error
		if !errors.As(err, &e) {
			c.log.Error("redeem failed", "err", err)
			return nil, apierr.Errorf(apierr.EMAPUNAVAILABLE, "the map cannot reach the orchestrator; join again")
		}
		return nil, err
	}
	return &Welcome{
		V: Version, Kind: KindWelcome, CharacterID: res.CharacterID,
		InstanceID: cfg.InstanceID, MapID: cfg.MapID, Epoch: res.Epoch, WorldHash: hash,
		TickHz: c.s.TickHz, SnapshotHz: c.s.SnapshotHz, MapConfig: cfg, TransferID: res.TransferID,
	}, nil
}

// reportTransfer tells the orchestrator, as the destination, how a transfer ended here;
// the control client retries it, and a report that never arrives is settled by the
// orchestrator's sweeper.
func (c *conn) reportTransfer(w *Welcome, welcomed bool) {
	r := control.TransferResult{TransferID: w.TransferID, InstanceID: w.InstanceID, Success: welcomed}
	if !welcomed {
		r.Reason = "the player left before the welcome"
	}
	ctx, cancel := context.WithTimeout(context.Background(), orDuration(c.s.RedeemWait, DefaultRedeemWait))
	defer cancel()
	if err := c.s.Redeemer.TransferResult(ctx, r); err != nil {
		c.log.Warn("transfer result not reported", "transfer", w.TransferID, "err", err)
	}
}

// handle answers one message of a welcomed player. A bad message is refused with an
// error frame and the connection stays open: a client bug must not cost the session.
func (c *conn) handle(typ int, data []byte) {
	if typ != websocket.TextMessage {
		c.sendError(apierr.EBADREQUEST, "messages are JSON text frames")
		return
	}
	var in Inbound
	if err := json.Unmarshal(data, &in); err != nil {
		c.sendError(apierr.EBADREQUEST, "invalid JSON: "+err.Error())
		return
	}
	if in.V != Version {
		c.sendError(apierr.EBADREQUEST, "unsupported envelope version; this server speaks v=1")
		return
	}
	switch in.Kind {
	case KindPing:
		t := in.T
		if t == "" {
			t = "0"
		}
		frame, err := json.Marshal(Pong{V: Version, Kind: KindPong, T: t})
		if err != nil {
			c.sendError(apierr.EBADREQUEST, "t must be a number")
			return
		}
		c.send(frame)
	case KindHello:
		c.sendError(apierr.EBADREQUEST, "already welcomed")
	case KindCommand:
		c.sendError(apierr.ENOTIMPLEMENTED, "commands are not simulated yet")
	default:
		c.sendError(apierr.EBADREQUEST, "unknown kind "+quote(in.Kind))
	}
}

func quote(s string) string {
	if len(s) > 32 {
		s = s[:32] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
