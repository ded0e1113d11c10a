// Package listen serves a map server's two listeners: the game listener that players'
// WebSockets reach through the orchestrator's proxy, and the control listener that
// only the orchestrator calls, every request carrying the orchestrator's credential
// towards this one container.
package listen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
)

// Health is the answer of GET /health, as the control RPC contract defines it.
type Health = mapcontract.MapHealth

// HandoffWait bounds how long /control/handoff waits for every player's transfer to be
// answered before it answers where things stand: longer than a transfer request's own
// bound (outbox.DefaultTransferLimit), so a call whose cut is not held up by a critical
// event ends with every answer.
const HandoffWait = 30 * time.Second

// Server owns a map server's listeners. Set the fields, call Open, and Close at shutdown.
type Server struct {
	GameAddr    string
	ControlAddr string
	// OrchCredential is what a control request must carry: only the orchestrator that
	// started this container has it.
	OrchCredential string
	Log            *slog.Logger

	// Blank marks a warm-pool server: it accepts the first instance that
	// /control/start-instance names instead of only its own.
	Blank bool
	// FailHealth is fault injection for tests only: /health answers 503.
	FailHealth bool
	// OnStart is called (outside s.mu) when /control/start-instance assigns the server
	// its instance for the first time, with the resolved MapConfig: it builds the
	// world and the game, and only when it returns nil is the instance taken. An
	// error is answered to the orchestrator (an *apierr.Error as it is, anything else
	// as map_config_refused) and the server stays free for another start.
	OnStart func(mapcontract.StartInstance, mapgen.MapConfig) error
	// OnHandoff hands every player over to the instance's next container
	// (/control/handoff) and answers once all are across or refused, or ctx ends: the
	// request's, bounded by HandoffWait. Nil answers 404 not_found: the map is then
	// upgraded by a restart.
	OnHandoff func(context.Context, mapcontract.Handoff) (mapcontract.HandoffAnswer, error)

	// startMu makes starts one at a time: the world is built inside the request.
	startMu sync.Mutex
	mu      sync.Mutex
	health  Health
	started *mapcontract.StartInstance

	game, control *echo.Echo
	controlGroup  *echo.Group
	gameLn        net.Listener
	controlLn     net.Listener
	servers       httpkit.Servers
}

// NewServer returns a Server whose control routes demand orchCredential, the
// orchestrator's credential towards this container (and nothing another map holds).
func NewServer(orchCredential string, health Health, log *slog.Logger) *Server {
	s := &Server{OrchCredential: orchCredential, health: health, Log: log, game: httpkit.NewEcho(log), control: httpkit.NewEcho(log)}
	s.controlGroup = s.control.Group("", httpkit.RequireSecret(orchCredential))
	s.controlGroup.GET(mapcontract.PathHealth, s.handleHealth)
	s.controlGroup.POST(mapcontract.PathStartInstance, s.handleStartInstance)
	s.controlGroup.POST(mapcontract.PathHandoff, s.handleHandoff)
	return s
}

// HandleControl serves h for GET at path on the control listener, behind the secret
// (the map's Prometheus /metrics). Call it before Open.
func (s *Server) HandleControl(path string, h http.Handler) {
	s.controlGroup.GET(path, echo.WrapHandler(h))
}

// HandleGame serves h at path on the game listener (the player WebSocket at /ws). Call
// it before Open.
func (s *Server) HandleGame(path string, h http.Handler) {
	s.game.GET(path, echo.WrapHandler(h))
}

// Health returns what /health currently answers; the instance id changes when a blank
// server is handed an instance.
func (s *Server) Health() Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.health
}

// SetWorldHash publishes the hash of the generated world in /health.
func (s *Server) SetWorldHash(hash string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.health.WorldHash = hash
}

// Started returns the instance assignment received through /control/start-instance,
// or nil while there was none.
func (s *Server) Started() *mapcontract.StartInstance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

func (s *Server) handleHealth(c echo.Context) error {
	if s.FailHealth {
		return apierr.Errorf(apierr.EUNAVAILABLE, "health failure injected (MAP_FAULT_FAIL_HEALTH)")
	}
	return c.JSON(http.StatusOK, s.Health())
}

// handleStartInstance assigns the server its instance and MapConfig. It is idempotent
// for the same instance id, so the orchestrator may repeat it after a restart.
func (s *Server) handleStartInstance(c echo.Context) error {
	var r mapcontract.StartInstance
	if err := httpkit.DecodeJSON(c, &r, httpkit.DefaultMaxBodySize); err != nil {
		return err
	}
	if !mapgen.ValidID(r.InstanceID) || !mapgen.ValidID(r.MapID) {
		return apierr.Errorf(apierr.EBADREQUEST, "instanceId and mapId must be %s", mapgen.IDRule)
	}
	// Resolve before taking the instance: a config this map cannot run is refused
	// with the reason, and the server stays free for a good one.
	cfg, err := mapgen.Resolve(r.InstanceID, r.MapID, r.Config)
	if err != nil {
		return apierr.Errorf(apierr.EBADREQUEST, "map config: %v", err)
	}
	s.startMu.Lock()
	defer s.startMu.Unlock()
	s.mu.Lock()
	switch {
	case s.started != nil && s.started.InstanceID == r.InstanceID:
		s.mu.Unlock()
		return c.JSON(http.StatusOK, s.Health())
	case s.started != nil || (!s.Blank && r.InstanceID != s.health.InstanceID):
		cur := s.health.InstanceID
		s.mu.Unlock()
		return apierr.Errorf(apierr.ECONFLICT, "this map server runs instance %q", cur)
	}
	s.mu.Unlock()
	if s.OnStart != nil {
		if err := s.OnStart(r, cfg); err != nil {
			s.Log.Error("instance refused", "startedInstance", r.InstanceID, "startedMap", r.MapID, "err", err)
			var e *apierr.Error
			if errors.As(err, &e) {
				return e
			}
			return apierr.Errorf(apierr.EMAPCONFIGREFUSED, "%v", err)
		}
	}
	s.mu.Lock()
	s.started = &r
	s.health.InstanceID, s.health.MapID = r.InstanceID, r.MapID
	h := s.health
	s.mu.Unlock()
	s.Log.Info("instance started", "startedInstance", r.InstanceID, "startedMap", r.MapID, "configBytes", len(r.Config))
	return c.JSON(http.StatusOK, h)
}

// handleHandoff hands the instance's players over to its next container (OnHandoff).
// Error codes: bad_request (no generation), not_found (the map does not hand over),
// conflict (a blank map runs no instance yet), map_unavailable (the map is stopping).
func (s *Server) handleHandoff(c echo.Context) error {
	var r mapcontract.Handoff
	if err := httpkit.DecodeJSON(c, &r, httpkit.DefaultMaxBodySize); err != nil {
		return err
	}
	if r.Generation == "" {
		return apierr.Errorf(apierr.EBADREQUEST, "generation must name the instance's next container")
	}
	if s.OnHandoff == nil {
		return apierr.Errorf(apierr.ENOTFOUND, "this map does not hand its players over; restart it instead")
	}
	if s.Blank && s.Started() == nil {
		return apierr.Errorf(apierr.ECONFLICT, "this map runs no instance yet")
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), HandoffWait)
	defer cancel()
	a, err := s.OnHandoff(ctx, r)
	if err != nil {
		return err
	}
	s.Log.Info("handoff answered", "generation", r.Generation, "moved", a.Moved, "transferred", a.Transferred, "remaining", a.Remaining)
	return c.JSON(http.StatusOK, a)
}

// Open binds both listeners synchronously and serves them in the background.
func (s *Server) Open() (err error) {
	if s.gameLn, err = net.Listen("tcp", s.GameAddr); err != nil {
		return fmt.Errorf("listen game %s: %w", s.GameAddr, err)
	}
	if s.controlLn, err = net.Listen("tcp", s.ControlAddr); err != nil {
		s.gameLn.Close()
		return fmt.Errorf("listen control %s: %w", s.ControlAddr, err)
	}
	s.servers.Serve(s.gameLn, s.game)
	s.servers.Serve(s.controlLn, s.control)
	return nil
}

// Close stops both listeners, waiting up to ctx for requests in flight.
func (s *Server) Close(ctx context.Context) error { return s.servers.Close(ctx) }

// GamePort and ControlPort are the bound ports (useful when configured as 0).
func (s *Server) GamePort() int    { return s.gameLn.Addr().(*net.TCPAddr).Port }
func (s *Server) ControlPort() int { return s.controlLn.Addr().(*net.TCPAddr).Port }
