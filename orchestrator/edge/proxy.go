package edge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/ratelimit"
	"github.com/mapyard/mapyard/mapserver/kernel/rawio"
)

// Proxy defaults; see the fields of Proxy.
const (
	DefaultIdleTimeout  = 2 * time.Minute
	DefaultWriteTimeout = 10 * time.Second
	DefaultDialTimeout  = 2 * time.Second
	DefaultMaxConns     = 10000
	DefaultLinkBatch    = time.Millisecond
	// BufferSize is the size of each pooled copy buffer; one is held per direction of
	// each connection. Game messages are small, and a larger one only grows memory.
	BufferSize = 8 << 10
	// handshakeTimeout bounds the map's answer to the forwarded upgrade request.
	handshakeTimeout = 10 * time.Second
	// closeGrace is how long the other direction may still flow after one side closed,
	// so that close frames cross before both sockets close.
	closeGrace = 2 * time.Second
)

// Copy engines of Proxy.Engine.
const (
	EngineEpoll     = "epoll"
	EngineGoroutine = "goroutine"
)

// Proxy forwards players' WebSocket upgrades to map game ports and then copies raw
// bytes both ways. After the handshake it never parses a frame: each read is written
// as it is to the other side, from a pooled buffer, which is the least per-message work
// a hop can do. Only the headers of the map's frames are followed (frameCursor), so
// that a player whose map went away is told so with a close frame of the edge's own
// (public.CloseMapGone) between two of the map's. It keeps no state beyond the
// connections it forwards.
type Proxy struct {
	// IdleTimeout closes a connection after no byte went either way for this long. The
	// map's own idle rule (30 s, pinged every 15 s) normally acts first.
	IdleTimeout time.Duration
	// WriteTimeout bounds one write to either side: a peer that stops reading is cut.
	WriteTimeout time.Duration
	// DialTimeout bounds the connection to the map's game port.
	DialTimeout time.Duration
	// Engine is how bytes are copied after the handshake: EngineEpoll (one epoll
	// set and one goroutine for all connections, Linux only) or EngineGoroutine
	// (two goroutines per connection); empty is EngineEpoll. Read when the first
	// connection is forwarded.
	Engine string
	// Link carries the players forwarded to a map over one link to it (link.go), when
	// the epoll engine runs and the map serves links; otherwise each player gets a
	// connection of its own to the map. Read at each Forward.
	Link bool
	// LinkBatch is the least time between two passes of the engine over ready sockets
	// while players' messages to and from links arrive faster than that (zero: no
	// least time). See epollEngine.pace.
	LinkBatch time.Duration
	// MoveTo, when set, is where a map moves a player (edgelink.KindMove): the address
	// of the container of instanceID's generation, once the route table has it
	// (waiting up to edgelink.MoveWait). Without it a moved player is closed with the
	// map-gone close and joins again.
	MoveTo func(instanceID, generation string) (addr string, err error)
	// Clients says how a request's client address is found: the address the map is
	// told (X-Forwarded-For) is that one.
	Clients ratelimit.ClientAddr
	// Metrics, when not nil, counts connections and bytes.
	Metrics *Metrics
	Log     *slog.Logger

	epollOnce sync.Once
	epoll     *epollEngine
	links     linkTable

	slots chan struct{}
	bufs  sync.Pool

	mu      sync.Mutex
	conns   map[*splice]struct{}
	closing bool
	wg      sync.WaitGroup
}

// NewProxy returns a Proxy that holds at most maxConns connections at once.
func NewProxy(maxConns int, log *slog.Logger) *Proxy {
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	return &Proxy{
		IdleTimeout: DefaultIdleTimeout, WriteTimeout: DefaultWriteTimeout, DialTimeout: DefaultDialTimeout, LinkBatch: DefaultLinkBatch,
		Engine: EngineEpoll, Link: true,
		Log:   log,
		slots: make(chan struct{}, maxConns),
		bufs:  sync.Pool{New: func() any { b := make([]byte, BufferSize); return &b }},
		conns: make(map[*splice]struct{}),
	}
}

// Active returns the number of connections being forwarded.
func (p *Proxy) Active() int { return len(p.slots) }

// Forward hands the WebSocket upgrade r to the map listening on addr (host:port) and,
// once the map accepted it, splices the two connections until either side ends. Errors
// are returned only before the upgrade, while the client can still be answered; codes:
// EBADREQUEST (not an upgrade), EUNAVAILABLE (at the connection limit, or draining),
// EMAPUNAVAILABLE (the map does not answer), or the map's own refusal (EFORBIDDEN for
// its origin check).
func (p *Proxy) Forward(w http.ResponseWriter, r *http.Request, instanceID, addr string) error {
	if !isWebSocketUpgrade(r) {
		return apierr.Errorf(apierr.EBADREQUEST, "a WebSocket upgrade request is required")
	}
	if !p.acquire() {
		p.Metrics.refused("limit")
		return apierr.Errorf(apierr.EUNAVAILABLE, "the edge is at its connection limit or shutting down; try again shortly")
	}
	if handled, err := p.forwardLink(w, r, instanceID, addr); handled {
		return err
	}
	backend, br, err := p.handshake(r, instanceID, addr)
	if err != nil {
		p.release()
		return err
	}
	client, crw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		backend.Close()
		p.release()
		return fmt.Errorf("hijack client connection: %w", err)
	}
	s := &splice{p: p, client: client, backend: backend}
	if err := s.start(br, crw.Reader); err != nil {
		client.Close()
		backend.Close()
		p.release()
		p.Log.Debug("websocket upgrade lost", "instance", instanceID, "err", err)
		return nil
	}
	if !p.track(s) {
		client.Close()
		backend.Close()
		p.release()
		return nil
	}
	p.Metrics.opened()
	p.serve(s)
	return nil
}

// serve copies s both ways with the configured engine. With the epoll engine it
// returns at once, the engine ending s later; the goroutine engine returns when s ended.
func (p *Proxy) serve(s *splice) {
	if ep := p.engine(); ep != nil && ep.adopt(s) == nil {
		return
	}
	s.run()
}

// engine returns the epoll engine, started on first use, or nil when the goroutine
// engine is configured or epoll cannot start here.
func (p *Proxy) engine() *epollEngine {
	p.epollOnce.Do(func() {
		if p.Engine == EngineGoroutine {
			return
		}
		ep, err := newEpollEngine(p.IdleTimeout, p.WriteTimeout, p.LinkBatch, &p.bufs)
		if err != nil {
			p.Log.Warn("epoll engine unavailable, copying with goroutines", "err", err)
			return
		}
		p.epoll = ep
	})
	return p.epoll
}

// dialError is Forward's error when the map's address could not be dialled at all:
// nothing was sent to the map and the client is still to be answered, so another
// address may be tried.
type dialError struct{ error }

func (e dialError) Unwrap() error { return e.error }

func isDialError(err error) bool {
	var d dialError
	return errors.As(err, &d)
}

// handshake dials the map, forwards the client's upgrade request and reads the map's
// answer. It returns the connection and its reader (which may already hold the map's
// first bytes) once the map switched protocols.
func (p *Proxy) handshake(r *http.Request, instanceID, addr string) (net.Conn, *bufio.Reader, error) {
	ctx, cancel := context.WithTimeout(r.Context(), p.DialTimeout)
	defer cancel()
	var d net.Dialer
	backend, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		p.Metrics.refused("map_unreachable")
		p.Log.Warn("map game port does not answer", "instance", instanceID, "addr", addr, "err", err)
		return nil, nil, dialError{apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q did not answer", instanceID)}
	}
	fail := func(err error) (net.Conn, *bufio.Reader, error) {
		backend.Close()
		p.Metrics.refused("map_unreachable")
		p.Log.Warn("map websocket handshake failed", "instance", instanceID, "err", err)
		return nil, nil, apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q did not answer", instanceID)
	}
	_ = backend.SetDeadline(time.Now().Add(handshakeTimeout))
	out := p.upgradeRequest(r)
	bw := bufio.NewWriterSize(backend, 1024)
	if err := out.Write(bw); err != nil {
		return fail(err)
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	br := bufio.NewReaderSize(backend, 1024)
	resp, err := http.ReadResponse(br, out)
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		err := mapRefusal(instanceID, resp)
		resp.Body.Close()
		backend.Close()
		p.Metrics.refused("map_refused")
		return nil, nil, err
	}
	// The map's 101 is replayed to the client as it is, with its headers.
	var head bytes.Buffer
	head.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	_ = resp.Header.Write(&head)
	head.WriteString("\r\n")
	return &prefixConn{Conn: backend, head: head.Bytes()}, br, nil
}

// upgradeRequest is the request sent to the map: the client's upgrade, with its query
// string, on the map's WebSocket path. The public Host is kept, because the map checks
// a browser's Origin against the host the page came from, and X-Forwarded-For is the
// client's address as the edge found it (Clients): the TCP peer, or what a trusted
// proxy in front of the edge named; whatever else the client sent is replaced.
func (p *Proxy) upgradeRequest(r *http.Request) *http.Request {
	out := &http.Request{
		Method:     http.MethodGet,
		URL:        &url.URL{Path: mapcontract.GamePath, RawQuery: r.URL.RawQuery},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1, ProtoMinor: 1,
		Header: r.Header.Clone(),
		Host:   r.Host,
	}
	out.Header.Del("Forwarded")
	if ip, ok := p.Clients.Of(r); ok {
		out.Header.Set("X-Forwarded-For", ip.String())
	}
	out.Header.Set("X-Forwarded-Host", r.Host)
	out.Header.Set("X-Forwarded-Proto", "http")
	if r.TLS != nil {
		out.Header.Set("X-Forwarded-Proto", "https")
	}
	return out
}

// mapRefusal turns a map's non-101 answer into the error the client gets: the map's
// own code and message when the answer is an error envelope, as every refusal of a
// map of this version is. Only an answer without one (a map of an earlier version, or
// something else on its port) is named by its status.
func mapRefusal(instanceID string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	var e httpkit.ErrorResponse
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return apierr.Errorf(e.Error.Code, "map instance %q refused the upgrade: %s", instanceID, e.Error.Message)
	}
	switch status := resp.StatusCode; status {
	case http.StatusForbidden:
		return apierr.Errorf(apierr.EFORBIDDEN, "map instance %q refused this page's origin", instanceID)
	case http.StatusBadRequest:
		return apierr.Errorf(apierr.EBADREQUEST, "map instance %q refused the upgrade: %s", instanceID, http.StatusText(status))
	default:
		return apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q refused the upgrade: %s", instanceID, http.StatusText(status))
	}
}

func isWebSocketUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && httpkit.HeaderHasToken(r.Header, "Connection", "upgrade") &&
		httpkit.HeaderHasToken(r.Header, "Upgrade", "websocket")
}

// prefixConn carries the 101 head that start writes to the client.
type prefixConn struct {
	net.Conn
	head []byte
}

func (p *Proxy) acquire() bool {
	p.mu.Lock()
	closing := p.closing
	p.mu.Unlock()
	if closing {
		return false
	}
	select {
	case p.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (p *Proxy) release() { <-p.slots }

func (p *Proxy) track(s *splice) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return false
	}
	p.conns[s] = struct{}{}
	p.wg.Add(1)
	return true
}

func (p *Proxy) untrack(s *splice) {
	p.mu.Lock()
	delete(p.conns, s)
	p.mu.Unlock()
	p.release()
	p.wg.Done()
}

// Close drains: no new connection is accepted, and the ones in flight are left to end
// on their own until ctx is done, when the rest are closed. It returns once every
// connection has ended.
func (p *Proxy) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	defer p.stopEpoll()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	n := len(p.conns)
	for s := range p.conns {
		s.closeBoth()
	}
	p.mu.Unlock()
	<-done
	return fmt.Errorf("drain: closed %d connections still open: %w", n, context.Cause(ctx))
}

// stopEpoll ends the epoll engine's goroutine once no connection is left.
func (p *Proxy) stopEpoll() {
	p.epollOnce.Do(func() {}) // no engine starts after this
	if p.epoll != nil {
		p.epoll.stop()
	}
}

// splice is one forwarded connection after the handshake.
type splice struct {
	p               *Proxy
	client, backend net.Conn
	started         time.Time
	last            atomic.Int64 // unix nanos of the last byte read from either side
	halfClosed      atomic.Bool
	closeOnce       sync.Once
	// frames follows what the map sent the client, from the bytes after its 101: with
	// the goroutine engine its map-to-client goroutine owns it, with the epoll engine
	// the engine does.
	frames frameCursor

	mu sync.Mutex
	ep *epollEngine // the epoll engine that owns the connections, if any
	pp *pollPair    // their pair in it
	ls *linkStream  // or the client's stream on a link, with backend nil
}

// start replays the map's 101 (and any bytes the map sent right after it) to the client
// and passes on any bytes the client sent before the answer, then clears the HTTP
// server's and the handshake's deadlines.
func (s *splice) start(backend *bufio.Reader, client *bufio.Reader) error {
	pc := s.backend.(*prefixConn)
	head := pc.head
	if n := backend.Buffered(); n > 0 {
		b, _ := backend.Peek(n)
		head = append(head, b...)
		s.frames.feed(b)
	}
	s.backend = pc.Conn
	_ = s.client.SetDeadline(time.Now().Add(s.p.WriteTimeout))
	if _, err := s.client.Write(head); err != nil {
		return fmt.Errorf("write 101 to client: %w", err)
	}
	if n := client.Buffered(); n > 0 {
		b, _ := client.Peek(n)
		if _, err := s.backend.Write(b); err != nil {
			return fmt.Errorf("pass early client bytes: %w", err)
		}
	}
	_ = s.client.SetDeadline(time.Time{})
	_ = s.backend.SetDeadline(time.Time{})
	s.started = time.Now()
	s.last.Store(s.started.UnixNano())
	return nil
}

// run copies both ways until both directions ended: client to map on the calling
// goroutine, map to client on one more.
func (s *splice) run() {
	down := make(chan int64, 1)
	go func() { down <- s.copy(s.client, s.backend, dirDown) }()
	up := s.copy(s.backend, s.client, dirUp)
	dn := <-down
	s.closeBoth()
	s.ended(up, dn)
}

// ended counts s out of the proxy once it is over, with the bytes it carried each way.
func (s *splice) ended(up, down int64) {
	s.p.Metrics.closed(up, down, time.Since(s.started))
	s.p.untrack(s)
}

// Directions of a splice, as metric labels.
const (
	dirUp   = "client_to_map"
	dirDown = "map_to_client"
)

// copy moves bytes from src to dst until src ends or fails, and returns how many. Read
// deadlines implement the idle timeout over both directions: a read that times out
// looks at when the last byte went either way and waits on if that is recent. Write
// deadlines are moved forward at most every WriteTimeout/2, not on every write.
func (s *splice) copy(dst, src net.Conn, dir string) int64 {
	bp := s.p.bufs.Get().(*[]byte)
	defer s.p.bufs.Put(bp)
	buf := *bp
	idle, wto := s.p.IdleTimeout, s.p.WriteTimeout
	_ = src.SetReadDeadline(time.Now().Add(idle))
	var total, wset int64
	counter := s.p.Metrics.bytes(dir)
	in, out := ioFor(src), ioFor(dst)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			now := time.Now().UnixNano()
			s.last.Store(now)
			if now-wset > int64(wto/2) {
				_ = dst.SetWriteDeadline(time.Unix(0, now).Add(wto))
				wset = now
			}
			if dir == dirDown {
				s.frames.feed(buf[:n])
			}
			if _, werr := out.Write(buf[:n]); werr != nil {
				if dir == dirUp && !errors.Is(werr, os.ErrDeadlineExceeded) {
					s.mapFailed(in, buf)
					return total
				}
				s.closeBoth()
				return total
			}
			total += int64(n)
			if counter != nil {
				counter.Add(float64(n))
			}
		}
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && !s.halfClosed.Load() {
			if last := time.Unix(0, s.last.Load()); time.Since(last) < idle {
				_ = src.SetReadDeadline(last.Add(idle))
				continue
			}
			s.closeBoth() // idle both ways
			return total
		}
		break
	}
	// src ended: pass the end on to dst and give the other direction a moment to
	// carry the peer's close frame before both sockets close. A map that ended first
	// without its close frame is gone: the client gets public.CloseMapGone after the
	// map's last whole frame or, when the map stopped inside a frame, after which
	// nothing may be written, the end of its connection without a close frame.
	if s.halfClosed.CompareAndSwap(false, true) {
		if dir == dirDown && !s.frames.closed {
			if !s.frames.atBoundary() {
				s.closeBoth() // a frame cut short: nothing may follow it
				return total
			}
			_ = dst.SetWriteDeadline(time.Now().Add(wto))
			if _, werr := out.Write(mapGoneClose); werr != nil {
				s.closeBoth()
				return total
			}
		}
		if tc, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		_ = dst.SetReadDeadline(time.Now().Add(closeGrace))
	}
	return total
}

// mapFailed ends the map's side after a write to it failed (the map is gone, its
// connection reset): the map-to-client direction then reads the end and tells the
// client, as when it reads the map's end first, and what the client still sends
// through client is read and dropped until it ends or the close grace passes, so that
// the client's socket is not closed with input unread (a reset that can destroy the
// close frame before the client reads it).
func (s *splice) mapFailed(client io.Reader, buf []byte) {
	_ = s.backend.Close()
	_ = s.client.SetReadDeadline(time.Now().Add(closeGrace))
	for {
		if _, err := client.Read(buf); err != nil {
			return
		}
	}
}

// ioFor is how a splice reads one side or writes the other: raw system calls where the
// platform allows (mapserver/kernel/rawio), net.Conn otherwise. Each call makes a new
// reader or writer, one per direction, as a rawio.Conn is not shared between
// goroutines.
func ioFor(c net.Conn) io.ReadWriter {
	if r := rawio.New(c); r != nil {
		return r
	}
	return c
}

func (s *splice) closeBoth() {
	s.mu.Lock()
	ep, pp, ls := s.ep, s.pp, s.ls
	s.mu.Unlock()
	switch {
	case ep != nil && ls != nil:
		ep.closeStream(ls)
		return
	case ep != nil:
		ep.close(pp)
		return
	}
	s.closeOnce.Do(func() {
		s.client.Close()
		s.backend.Close()
	})
}
