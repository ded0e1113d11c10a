// Package ws serves players' WebSocket connections on a map server's game listener:
// the join handshake (a hello carrying a one-time ticket, redeemed through the
// orchestrator, answered with a welcome), ping/pong, and the per-connection plumbing the
// simulation will send snapshots through. Each connection has exactly one reader and one
// writer goroutine and a bounded send queue; a client that cannot keep up is dropped
// rather than allowed to stall the sender.
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

	"github.com/mapyard/mapyard/orchestrator/control"
)

// Redeemer redeems a player's join ticket or transfer token for this map through the
// orchestrator. Error codes: ticket_invalid, ticket_expired, ticket_used, wrong_map,
// map_quarantined, map_unavailable; any error that is not an *apierr.Error means
// the orchestrator could not be reached.
type Redeemer interface {
	Redeem(ctx context.Context, r control.RedeemRequest) (*control.RedeemResult, error)
	// TransferResult reports, as the destination, whether a transferred player was
	// welcomed, which completes (or aborts) the transfer at the orchestrator.
	TransferResult(ctx context.Context, r control.TransferResult) error
}

var _ Redeemer = (*control.Client)(nil)

// Defaults of the Server's tunables.
const (
	DefaultHelloTimeout = 5 * time.Second
	DefaultIdleTimeout  = 30 * time.Second
	DefaultWorldWait    = 2 * time.Second
	DefaultRedeemWait   = 5 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	DefaultSendQueue    = 64
	// DefaultReadLimit bounds one client frame; a larger one closes the connection with
	// 1009. Client messages are small commands, so 4 KiB leaves ample room.
	DefaultReadLimit = 4 << 10
)

// Server is the http.Handler of GET /ws. Set the fields before serving; zero durations
// and sizes take the defaults above.
type Server struct {
	Redeemer Redeemer
	World    *World
	Log      *slog.Logger
	// TickHz and SnapshotHz are announced in the welcome.
	TickHz, SnapshotHz int
	// AllowedOrigins are further browser origins (scheme://host[:port]) allowed to
	// connect besides the map's own host; requests without an Origin header (non-browser
	// clients) are always allowed, as the ticket is what admits a player.
	AllowedOrigins []string

	HelloTimeout, IdleTimeout, WorldWait, RedeemWait, WriteTimeout time.Duration
	SendQueue                                                      int
	ReadLimit                                                      int64

	upgradeOnce sync.Once
	upgrader    websocket.Upgrader

	mu      sync.Mutex
	players map[*conn]struct{}
}

// NewServer returns a Server that redeems tickets through r and welcomes players into
// world.
func NewServer(r Redeemer, world *World, tickHz, snapshotHz int, log *slog.Logger) *Server {
	return &Server{Redeemer: r, World: world, TickHz: tickHz, SnapshotHz: snapshotHz, Log: log}
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

// Players is the number of welcomed players connected now; heartbeats report it, and
// the orchestrator stops an idle map only when it is zero.
func (s *Server) Players() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.players)
}

// Broadcast queues one message for every welcomed player without ever blocking: a
// player whose send queue is full is dropped. It is how the tick will send events.
func (s *Server) Broadcast(frame []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.players {
		c.send(frame)
	}
}

func (s *Server) join(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.players == nil {
		s.players = make(map[*conn]struct{})
	}
	s.players[c] = struct{}{}
}

func (s *Server) leave(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.players, c)
}

// ServeHTTP upgrades the request and runs the connection until it ends. The handler's
// goroutine becomes the connection's reader.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.upgradeOnce.Do(func() {
		s.upgrader = websocket.Upgrader{
			HandshakeTimeout: 10 * time.Second,
			ReadBufferSize:   4 << 10,
			WriteBufferSize:  4 << 10,
			CheckOrigin:      s.checkOrigin,
		}
	})
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		// The upgrader already answered with the HTTP error.
		s.Log.Debug("websocket upgrade refused", "err", err, "origin", r.Header.Get("Origin"))
		return
	}
	newConn(s, ws).run()
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
