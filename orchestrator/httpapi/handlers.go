package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
)

// handleHealthz answers 200 while the process serves requests: liveness only.
func (s *Server) handleHealthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok", "version": orchestrator.Version})
}

// handleReadyz answers 200 once the default map is ready to take players, 503 before.
func (s *Server) handleReadyz(c echo.Context) error {
	if !s.Maps.Ready() {
		return apierr.Errorf(apierr.EUNAVAILABLE, "default map is not ready")
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) handleMapReady(c echo.Context) error {
	var r mapcontract.MapReady
	if err := httpkit.DecodeJSON(c, &r, httpkit.DefaultMaxBodySize); err != nil {
		return err
	}
	if err := actFor(c, r.InstanceID); err != nil {
		return err
	}
	reg := orchestrator.MapRegistration{InstanceID: r.InstanceID, MapID: r.MapID, GamePort: r.GamePort, ControlPort: r.ControlPort, Version: r.Version}
	if err := s.Maps.MapReady(c.Request().Context(), reg); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]bool{"registered": true})
}

// handleHeartbeat answers {"registered": false} to a map this orchestrator does not know
// as ready (for example after an orchestrator restart), which makes the map register
// again.
func (s *Server) handleHeartbeat(c echo.Context) error {
	var h mapcontract.Heartbeat
	if err := httpkit.DecodeJSON(c, &h, httpkit.DefaultMaxBodySize); err != nil {
		return err
	}
	if err := actFor(c, h.InstanceID); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, mapcontract.HeartbeatAnswer{Registered: s.Maps.Heartbeat(h.InstanceID, h.Players)})
}

// handleAdminCreate creates a map instance at runtime from a MapConfig, starts it and
// waits for the start's outcome: 201 with the instance (state "ready", or
// "image_missing", or "starting" when the start outlasts ORCH_MAP_START_TIMEOUT_MS);
// 400 map_config_refused with the game's reason when the map's game refused the
// config, and then nothing is kept. Its image is the request's "image", else
// the one its config or its map's template names, else the host's default; one the
// host does not allow is 400 image_not_allowed and nothing is created.
func (s *Server) handleAdminCreate(c echo.Context) error {
	var r orchestrator.CreateInstance
	if err := httpkit.DecodeJSON(c, &r, httpkit.DefaultMaxBodySize); err != nil {
		return err
	}
	// A partial config ({"seed":7}) is completed from the map's template, and the
	// instance keeps the full one, so the map server is handed a config it reads as
	// it is. Refuse here, with the reason, a config the map server would refuse:
	// otherwise the instance would be created and then never become ready.
	full, err := mapgen.Complete(r.InstanceID, r.MapID, r.Config)
	if err != nil {
		return apierr.Errorf(apierr.EBADREQUEST, "map config: %v", err)
	}
	if err := mapgen.ValidateImage("image", r.Image, true); err != nil {
		return apierr.Errorf(apierr.EBADREQUEST, "%v", err)
	}
	var named struct {
		Image string `json:"image"`
	}
	_ = json.Unmarshal(r.Config, &named) // Complete checked it is an object (or absent)
	if r.Image != "" && named.Image != "" && named.Image != r.Image {
		return apierr.Errorf(apierr.EBADREQUEST, "image %q and config.image %q disagree: name the image once", r.Image, named.Image)
	}
	if r.Image == "" {
		r.Image = full.Image
	}
	if len(r.Config) > 0 && string(r.Config) != "null" {
		// The image is kept in the instance's record, not in the config maps are
		// handed: a map reads its config strictly, and where it runs is not its world.
		full.Image = ""
		if r.Config, err = json.Marshal(full); err != nil {
			return fmt.Errorf("encode map config of %q: %w", r.InstanceID, err)
		}
	}
	r.Cold = true
	if _, err := s.Maps.Create(c.Request().Context(), r); err != nil {
		return err
	}
	inst, err := s.Maps.Settle(c.Request().Context(), r.InstanceID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, inst)
}

// handleAdminRestart replaces an instance's container (not counted as a crash); 202.
func (s *Server) handleAdminRestart(c echo.Context) error {
	if err := s.Maps.Restart(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return s.adminInstance(c, http.StatusAccepted)
}

// handleAdminStop stops an instance cleanly and answers once it stopped.
func (s *Server) handleAdminStop(c echo.Context) error {
	if err := s.Maps.Stop(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return s.adminInstance(c, http.StatusOK)
}

func (s *Server) adminInstance(c echo.Context, status int) error {
	inst, err := s.Maps.Instance(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(status, inst)
}

func (s *Server) handleMetrics(c echo.Context) error {
	if s.Metrics == nil {
		return apierr.Errorf(apierr.ENOTFOUND, "metrics are not enabled")
	}
	s.Metrics.ServeHTTP(c.Response(), c.Request())
	return nil
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
