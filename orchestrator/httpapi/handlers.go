package httpapi

import (
	"encoding/json"
	"errors"
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
	gen, _ := c.Get(generationKey).(string)
	reg := orchestrator.MapRegistration{InstanceID: r.InstanceID, Generation: gen, MapID: r.MapID, GamePort: r.GamePort, ControlPort: r.ControlPort, Version: r.Version}
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
		if owner, _ := c.Get(ownerKey).(string); owner == h.InstanceID && mapgen.IsPoolID(owner) {
			// A warm-pool container just handed an instance beats once more under its
			// pool id before it takes the instance's name: it is registered, as the
			// instance's map, and its next beat names the instance.
			return c.JSON(http.StatusOK, mapcontract.HeartbeatAnswer{Registered: true})
		}
		return err
	}
	gen, _ := c.Get(generationKey).(string)
	return c.JSON(http.StatusOK, mapcontract.HeartbeatAnswer{Registered: s.Maps.Heartbeat(h.InstanceID, gen, h.Players)})
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
	full, err := s.Templates.Complete(r.InstanceID, r.MapID, r.Config)
	if errors.Is(err, mapgen.ErrUnknownMap) {
		return apierr.Errorf(apierr.EBADREQUEST, "map config: %v: a map without a template needs a config, "+
			`e.g. "config": {"seed": 7} (laid over the default map's template)`, err)
	}
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

// upgradeRequest is the body of POST /admin/maps/{id}/upgrade.
type upgradeRequest struct {
	Image string `json:"image"`
}

// handleAdminUpgrade starts a live upgrade of one map to another image: 202 with the
// instance, its progress in "upgrade" (and in GET /admin/maps/{id} until it ends).
func (s *Server) handleAdminUpgrade(c echo.Context) error {
	var r upgradeRequest
	if err := httpkit.DecodeJSON(c, &r, httpkit.DefaultMaxBodySize); err != nil {
		return err
	}
	if err := mapgen.ValidateImage("image", r.Image, false); err != nil {
		return apierr.Errorf(apierr.EBADREQUEST, "%v", err)
	}
	inst, err := s.Maps.Upgrade(c.Request().Context(), c.Param("id"), r.Image)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, inst)
}

// upgradeAllRequest is the body of POST /admin/upgrade.
type upgradeAllRequest struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Parallel int    `json:"parallel"`
}

// handleAdminUpgradeAll upgrades every ready map of one image to another, at most
// "parallel" (default 1) at a time: 202 with the instances it upgrades.
func (s *Server) handleAdminUpgradeAll(c echo.Context) error {
	var r upgradeAllRequest
	if err := httpkit.DecodeJSON(c, &r, httpkit.DefaultMaxBodySize); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"from", r.From}, {"to", r.To}} {
		if err := mapgen.ValidateImage(f.name, f.v, false); err != nil {
			return apierr.Errorf(apierr.EBADREQUEST, "%v", err)
		}
	}
	if r.Parallel < 0 || r.Parallel > 64 {
		return apierr.Errorf(apierr.EBADREQUEST, "parallel must be 1 to 64")
	}
	ids, err := s.Maps.UpgradeAll(c.Request().Context(), r.From, r.To, r.Parallel)
	if err != nil {
		return err
	}
	if ids == nil {
		ids = []string{}
	}
	return c.JSON(http.StatusAccepted, map[string]any{"instances": ids, "to": r.To})
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
