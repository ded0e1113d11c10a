package httpapi

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// PathAdminFaults sets the orchestrator's own test faults (ORCH_ALLOW_FAULT_INJECTION=1
// only; without it the route does not exist).
const PathAdminFaults = "/admin/faults"

// maxControlDelay bounds the injected delay: a fault that slows the orchestrator, not
// one that stops it.
const maxControlDelay = 30 * time.Second

// Faults are the orchestrator's test switches, for the soak's "slow orchestrator": a
// delay before every answer to a map or to the edge on the control listener, set and
// cleared at run time through PathAdminFaults. The admin routes are never delayed, so
// the switch can always be turned off.
type Faults struct {
	controlDelay atomic.Int64 // nanoseconds
}

// FaultsRequest is PathAdminFaults' body and answer.
type FaultsRequest struct {
	// ControlDelayMs delays every map's and the edge's call on the control listener
	// this many milliseconds before it is handled (0 = off, at most 30000).
	ControlDelayMs int64 `json:"controlDelayMs"`
}

// EnableFaults turns the test switches on (ORCH_ALLOW_FAULT_INJECTION=1) and opens
// PathAdminFaults. Call it before Open.
func (s *Server) EnableFaults() {
	s.faults = &Faults{}
	s.control.PUT(PathAdminFaults, rpc(1024, func(_ context.Context, r FaultsRequest) (FaultsRequest, error) {
		d := time.Duration(r.ControlDelayMs) * time.Millisecond
		if d < 0 || d > maxControlDelay {
			return FaultsRequest{}, apierr.Errorf(apierr.EBADREQUEST, "controlDelayMs must be 0 to %d", maxControlDelay.Milliseconds())
		}
		s.faults.controlDelay.Store(int64(d))
		s.Log.Warn("fault injection: calls of maps and of the edge on the control listener are delayed", "delayMs", r.ControlDelayMs)
		return r, nil
	}), s.requireAdmin)
}

// slow delays a map's or the edge's call by the injected delay, if any, or until the
// caller gives up.
func (s *Server) slow(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.faults != nil {
			if d := time.Duration(s.faults.controlDelay.Load()); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-c.Request().Context().Done():
					t.Stop()
					return c.Request().Context().Err()
				}
			}
		}
		return next(c)
	}
}
