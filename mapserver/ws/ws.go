// Package ws is the player WebSocket transport of a map server's game listener: the
// upgrade with its origin check, one reader goroutine per connection, one flusher per
// server that writes every connection's queued frames with non-blocking writevs, a
// bounded send queue with an urgent lane for small replies, a read size limit,
// per-connection rate limits, an idle timeout and keepalive pings. It knows nothing of
// the game: the first message is handed to a mapserver.Handshaker (which redeems the
// ticket and welcomes the player), every later one to the Session it returns. A client
// that cannot keep up with its queue is dropped rather than allowed to stall the sender
// (the tick).
//
// The same players can also arrive through the edge's link (ServeLink, package
// mapserver/kernel/edgelink): one connection carrying each player as a stream, served by the same
// rules (stream.go, frames.go, link.go), the flusher writing a whole round to the link
// with one write.
package ws

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// Defaults of the Server's tunables.
const (
	DefaultHelloTimeout = 5 * time.Second
	DefaultIdleTimeout  = 30 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	// DefaultSendQueue bounds the frames waiting for one client: at 15 snapshots a
	// second, 32 frames are two seconds of stream, far beyond any live client's lag
	// (its baselines are older than the server keeps by then). Every connection holds
	// room for a full queue.
	DefaultSendQueue = 32
	// DefaultReadLimit bounds one client message, all its fragments together; a larger
	// one closes the connection with 1009. Client messages are small commands, so 4 KiB
	// leaves ample room.
	DefaultReadLimit = 4 << 10
	// readBufferSize is a connection's own read buffer: room for a few of the small
	// messages clients send (inputs, acks, pings); a larger message is read through it.
	readBufferSize = 512
	// writeBufferSize is the size of gorilla's pooled write buffers, which it never
	// draws from: data frames are the flusher's, control frames need none.
	writeBufferSize = 256
)

// Server is the http.Handler of GET /ws, made by NewServer. Set the fields before
// serving; zero durations and sizes take the defaults above.
type Server struct {
	Handshaker mapserver.Handshaker
	Log        *slog.Logger
	// AllowedOrigins are further browser origins (scheme://host[:port]) allowed to
	// connect besides the map's own host; requests without an Origin header (non-browser
	// clients) are always allowed, as the ticket is what admits a player.
	AllowedOrigins []string

	HelloTimeout, IdleTimeout, WriteTimeout time.Duration
	SendQueue                               int
	ReadLimit                               int64
	// Limits are every connection's token buckets on messages and bytes after the
	// hello; NewServer sets DefaultLimits, a zero rate turns a bucket off.
	Limits Limits
	// Metrics counts refused messages; nil keeps unregistered counters.
	Metrics *Metrics

	upgradeOnce sync.Once
	upgrader    websocket.Upgrader
	refused     map[string]prometheus.Counter // by reason

	flusher *flusher

	mu     sync.Mutex
	conns  map[writer]struct{} // every connection and stream being served, for keepalive
	active int
	idle   chan struct{} // closed when active drops to zero, for Drain
}

// NewServer returns a Server that hands connections to h.
func NewServer(h mapserver.Handshaker, log *slog.Logger) *Server {
	s := &Server{Handshaker: h, Log: log, Limits: DefaultLimits()}
	s.flusher = newFlusher(s)
	return s
}

// ParseOrigins splits a comma-separated origin list (MAP_ALLOWED_ORIGINS), dropping
// blanks and trailing slashes.
func ParseOrigins(list string) []string {
	var out []string
	for _, o := range strings.Split(list, ",") {
		if o = strings.TrimRight(strings.TrimSpace(o), "/"); o != "" {
			out = append(out, strings.ToLower(o))
		}
	}
	return out
}

// ServeHTTP upgrades the request and starts the connection on a goroutine of its own,
// which becomes the connection's reader; the handler returns at once.
//
// Returning matters for what an idle player costs: the HTTP server's goroutine (deep
// router and server frames on its stack) and its per-connection state, a 4 KiB read
// buffer and a 4 KiB write buffer among it, stay alive as long as the handler runs.
// The connection instead reads through a small buffer of its own (client messages are
// small; a larger one is read through it). The flusher writes frames itself and
// gorilla's own control writes need no buffer, so gorilla is given a write buffer pool
// it never draws from: without one it would keep the hijacked 4 KiB write buffer.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.start()
	// Refused here rather than by the upgrader, which would answer a bare 403: the edge
	// passes a map's refusal on by the code of its answer.
	if !s.checkOrigin(r) {
		s.logger().Debug("websocket upgrade refused: origin", "origin", r.Header.Get("Origin"))
		writeError(w, http.StatusForbidden, apierr.EFORBIDDEN, "origin not allowed")
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		// The upgrader already answered with the HTTP error.
		s.logger().Debug("websocket upgrade refused", "err", err, "origin", r.Header.Get("Origin"))
		return
	}
	c := newConn(s, ws)
	s.track(c, 1)
	// The request's context ends when this handler returns; the connection keeps its
	// values, not its end.
	ctx := context.WithoutCancel(r.Context())
	go c.run(ctx, func() { s.track(c, -1) })
}

// start completes the Server's set-up on its first connection or link, and starts the
// flusher.
func (s *Server) start() {
	s.upgradeOnce.Do(func() {
		s.upgrader = websocket.Upgrader{
			HandshakeTimeout: 10 * time.Second,
			CheckOrigin:      s.checkOrigin,
			Error:            upgradeError,
			ReadBufferSize:   readBufferSize,
			WriteBufferSize:  writeBufferSize,
			WriteBufferPool:  &sync.Pool{},
		}
		if s.Metrics == nil {
			s.Metrics = NewMetrics(nil)
		}
		go s.flusher.run(orDuration(s.IdleTimeout, DefaultIdleTimeout) / sweeps)
		s.refused = make(map[string]prometheus.Counter)
		for _, r := range []string{ReasonMessages, ReasonBytes, ReasonClosed} {
			s.refused[r] = s.Metrics.RateLimited.WithLabelValues(r)
		}
	})
}

// Active is the number of connections being served, streams of links included.
func (s *Server) Active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// Drain waits until every connection has ended (after the game closed them, so that
// their close frames are written before the process exits), or until ctx ends.
func (s *Server) Drain(ctx context.Context) error {
	s.mu.Lock()
	if s.active == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Server) track(c writer, delta int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = make(map[writer]struct{})
	}
	if delta > 0 {
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
	s.active += delta
	if s.active == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// readLimit bounds one client message.
func (s *Server) readLimit() int64 {
	if s.ReadLimit > 0 {
		return s.ReadLimit
	}
	return DefaultReadLimit
}

// counter is the rate-limit counter of reason.
func (s *Server) counter(reason string) prometheus.Counter { return s.refused[reason] }

func (s *Server) logger() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// upgradeError answers what the upgrader refuses (a request that is no WebSocket
// upgrade) with the error envelope, as every other refusal of the map is answered.
func upgradeError(w http.ResponseWriter, _ *http.Request, status int, reason error) {
	code := apierr.EBADREQUEST
	switch {
	case status == http.StatusMethodNotAllowed:
		code = apierr.EMETHODNOTALLOWED
	case status >= 500:
		code = apierr.EINTERNAL
	}
	writeError(w, status, code, reason.Error())
}

// checkOrigin admits non-browser clients (no Origin), the map's own host (the Host the
// orchestrator's edge forwards), and the configured origins; it keeps other sites'
// pages from opening a player's connection.
func (s *Server) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	origin = strings.ToLower(strings.TrimRight(origin, "/"))
	for _, o := range s.AllowedOrigins {
		if o == origin {
			return true
		}
	}
	return false
}

func orDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
