package httpapi

import (
	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/orchestrator/control"
	"github.com/mapyard/mapyard/orchestrator/ratelimit"
)

// PublicLimits are the per-client-address rate limits of the public listener: joins,
// and map WebSocket upgrades. A nil Limiter is no limit.
type PublicLimits struct {
	Join, WS *ratelimit.Limiter
	// Clients says how a request's client address is found (the TCP peer unless it is
	// a trusted proxy).
	Clients ratelimit.ClientAddr
}

// rateLimit is the public listener's middleware: it runs after routing, so it knows
// which route a request took and applies that route's limit.
func (s *Server) rateLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		var l *ratelimit.Limiter
		switch c.Path() {
		case control.PathJoin:
			l = s.Limits.Join
		case PathMapWS:
			l = s.Limits.WS
		}
		if l != nil && l.Refuse(c.Response(), c.Request(), s.Limits.Clients) {
			return nil
		}
		return next(c)
	}
}
