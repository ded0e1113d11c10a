package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/control"
)

// handleHealthz answers 200 while the process serves requests: liveness only.
func (s *Server) handleHealthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok", "version": orchestrator.Version})
}

// handleReadyz answers 200 once the default map is ready to take players, 503 before.
func (s *Server) handleReadyz(c echo.Context) error {
	if !s.Maps.Ready() {
		return orchestrator.Errorf(orchestrator.EUNAVAILABLE, "default map is not ready")
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) handleMapReady(c echo.Context) error {
	var r orchestrator.MapReady
	if err := control.DecodeJSON(c, &r, control.DefaultMaxBodySize); err != nil {
		return err
	}
	if err := s.Maps.MapReady(c.Request().Context(), r); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]bool{"registered": true})
}

// handleHeartbeat answers {"registered": false} to a map this orchestrator does not know
// as ready (for example after an orchestrator restart), which makes the map register
// again.
func (s *Server) handleHeartbeat(c echo.Context) error {
	var h control.Heartbeat
	if err := control.DecodeJSON(c, &h, control.DefaultMaxBodySize); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, control.HeartbeatAnswer{Registered: s.Maps.Registered(h.InstanceID)})
}

func (s *Server) handleAdminMaps(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string][]orchestrator.Instance{"instances": s.Maps.Instances()})
}

func (s *Server) handleAdminMap(c echo.Context) error {
	inst, err := s.Maps.Instance(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, inst)
}
