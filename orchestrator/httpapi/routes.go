package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/routetable"
	"github.com/mapyard/mapyard/orchestrator"
)

// routePoll is how often a waiting route watch looks at the supervisor's instances. The
// supervisor has no change feed; reading its in-memory list is cheap, and a watch only
// polls while an edge waits on it.
const routePoll = 50 * time.Millisecond

// routeWatch numbers the versions of the route table. The version starts with an id of
// this process, so an edge that watched an earlier orchestrator gets the new table at
// once instead of waiting on a number that happens to match.
type routeWatch struct {
	maps orchestrator.Maps
	boot string
	done chan struct{} // closed by Close: waiting watches answer at once

	mu     sync.Mutex
	n      uint64
	routes []routetable.Route
	ready  bool
}

func newRouteWatch(maps orchestrator.Maps) *routeWatch {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return &routeWatch{maps: maps, boot: hex.EncodeToString(b), done: make(chan struct{})}
}

// current returns the table now, with a new version if it changed since the last look.
func (w *routeWatch) current() routetable.RouteTable {
	routes, ready := w.routesOf(w.maps.Instances()), w.maps.Ready()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 || ready != w.ready || !slices.Equal(routes, w.routes) {
		w.n++
		w.routes, w.ready = routes, ready
	}
	return routetable.RouteTable{Version: fmt.Sprintf("%s-%d", w.boot, w.n), Ready: w.ready, Routes: w.routes}
}

// routesOf returns the routes of instances, in their order, each with the verdict of
// the one readiness gate.
func (w *routeWatch) routesOf(instances []orchestrator.Instance) []routetable.Route {
	routes := make([]routetable.Route, 0, len(instances))
	for _, inst := range instances {
		r := routetable.Route{InstanceID: inst.ID, State: string(inst.State), GamePort: inst.GamePort, GameAddr: inst.GameAddr, Generation: inst.Generation}
		if _, err := w.maps.Gate(inst.ID); err != nil {
			r.Code, r.Message = apierr.Code(err), apierr.Message(err)
		}
		routes = append(routes, r)
	}
	return routes
}

// handleRoutes serves the edge's long-poll: the table as soon as its version differs
// from ?after=, else the same table after ?waitMs= (default routetable.DefaultRouteWait).
func (s *Server) handleRoutes(c echo.Context) error {
	wait := routetable.DefaultRouteWait
	if v := c.QueryParam("waitMs"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 {
			return apierr.Errorf(apierr.EBADREQUEST, "waitMs=%q: not a number of milliseconds", v)
		}
		wait = min(time.Duration(ms)*time.Millisecond, routetable.MaxRouteWait)
	}
	after := c.QueryParam("after")
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(routePoll)
	defer tick.Stop()
	for {
		t := s.routes.current()
		if t.Version != after {
			return c.JSON(http.StatusOK, t)
		}
		select {
		case <-tick.C:
			continue
		case <-deadline.C:
		case <-s.routes.done:
		case <-c.Request().Context().Done():
		}
		return c.JSON(http.StatusOK, t)
	}
}
