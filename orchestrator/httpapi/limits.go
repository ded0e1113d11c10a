package httpapi

import (
	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/ratelimit"
)

// PublicLimits are the per-client-address rate limits of the orchestrator's own public
// listener, which serves joins (players normally join through the edge, which has its
// own limits, package edge). A nil Limiter is no limit.
type PublicLimits struct {
	Join *ratelimit.Limiter
	// Clients says how a request's client address is found (the TCP peer unless it is
	// a trusted proxy).
	Clients ratelimit.ClientAddr
}

// rateLimit is the public listener's middleware: it runs after routing, so it knows
// which route a request took, and reads Limits at request time, so they may be set
// after NewServer.
func (s *Server) rateLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Path() == public.PathJoin && s.Limits.Join != nil && s.Limits.Join.Refuse(c.Response(), c.Request(), s.Limits.Clients) {
			return nil
		}
		return next(c)
	}
}
