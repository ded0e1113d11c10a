package httpapi

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/orchestrator/keys"
)

// Callers resolves a verified map credential to the instance its container runs now.
// The supervisor implements it: the credential names the container (its instance id at
// creation and its generation), and a warm-pool container keeps its credential after it
// is handed an instance.
type Callers interface {
	// InstanceOf returns the instance the container of id runs, or ok=false when id is
	// not a current container of this orchestrator (replaced, removed, or unknown).
	InstanceOf(id keys.Identity) (instanceID string, ok bool)
	// Adopted reports whether the running containers are known yet: an orchestrator
	// serves its control listener while it still adopts them after a restart, and a
	// map's call meanwhile is told to try again, not that it is no longer current.
	Adopted() bool
}

// callerKey is where requireMap leaves the calling instance in the echo context.
const callerKey = "mapyard.caller"

// generationKey is where requireMap leaves the calling container's generation: two
// containers of one instance speak during a live upgrade.
const generationKey = "mapyard.generation"

// ownerKey is where requireMap leaves the id the calling container's credential was
// minted for: its instance, or the pool id of a warm-pool container since handed one.
const ownerKey = "mapyard.owner"

// requireMap is the middleware of the map-facing routes: the request must carry a map
// credential minted by this orchestrator's root (401 otherwise) for a container that is
// still current (403 otherwise). The instance it runs is the caller every handler checks
// the request against.
func (s *Server) requireMap(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := s.Root.VerifyMapCredential(c.Request().Header.Get(httpkit.SecretHeader))
		if err != nil {
			return err
		}
		instance := id.InstanceID
		if s.Callers != nil {
			var ok bool
			if instance, ok = s.Callers.InstanceOf(id); !ok && !s.Callers.Adopted() {
				return apierr.Errorf(apierr.EUNAVAILABLE, "the orchestrator is starting and does not know container %s yet; try again", id)
			} else if !ok {
				return apierr.Errorf(apierr.EFORBIDDEN, "credential of map container %s, which is no longer current", id)
			}
		}
		c.Set(callerKey, instance)
		c.Set(generationKey, id.Generation)
		c.Set(ownerKey, id.InstanceID)
		return next(c)
	}
}

// requireAdmin is the middleware of the admin routes and metrics (loopback only): the
// request must carry the root secret, compared in constant time.
func (s *Server) requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !s.Root.IsRoot(c.Request().Header.Get(httpkit.SecretHeader)) {
			return apierr.Errorf(apierr.EUNAUTHORIZED, "missing or wrong %s header", httpkit.SecretHeader)
		}
		return next(c)
	}
}

// requireEdge is the middleware of the routes the edge calls (the route-table watch,
// join and character API forwarding): the request must carry the edge credential, or the root secret
// (an operator, or an edge run by hand with it). Its refusal has a code of its own,
// EEDGEUNAUTHORIZED: the handlers behind it refuse players with 401s too (a bad
// ticket, a missing key), which the edge passes on, and the edge must tell its own
// refusal from theirs by what the answer says, not by what it lacks.
func (s *Server) requireEdge(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		got := c.Request().Header.Get(httpkit.SecretHeader)
		if !s.Root.IsEdge(got) && !s.Root.IsRoot(got) {
			return apierr.Errorf(apierr.EEDGEUNAUTHORIZED, "missing or wrong %s header: neither the edge credential nor the root secret", httpkit.SecretHeader)
		}
		return next(c)
	}
}

// actFor refuses, with EFORBIDDEN, a request that names an instance other than the
// caller's.
func actFor(c echo.Context, instanceID string) error {
	caller, _ := c.Get(callerKey).(string)
	if caller == "" || caller != instanceID {
		return apierr.Errorf(apierr.EFORBIDDEN, "map instance %q may not act for %q", caller, instanceID)
	}
	return nil
}

// mapRPC is rpc for the map-facing routes: after decoding, the instance the request acts
// for (instance picks it out) must be the caller.
func mapRPC[Req, Res any](limit int64, instance func(*Req) string, fn func(context.Context, Req) (Res, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		var r Req
		if err := httpkit.DecodeJSON(c, &r, limit); err != nil {
			return err
		}
		if err := actFor(c, instance(&r)); err != nil {
			return err
		}
		res, err := fn(c.Request().Context(), r)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, res)
	}
}
