package httpapi

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/orchestrator/apierr"
)

// PathMapWS is the public route of a map instance's player WebSocket; see
// orchestrator.WSPath.
const PathMapWS = "/maps/:id/ws"

// mapWSPath is where every map server serves its player WebSocket on its game port.
const mapWSPath = "/ws"

// handleMapWS is the edge: it proxies a player's WebSocket upgrade to the map instance's
// game port on loopback, so clients never learn (or reach) a map's port. It keeps no
// state beyond the connection it forwards, so it could later run as its own process.
// Maps that cannot take players are refused before any upgrade by the supervisor's
// one gate (Maps.Gate), with the same codes a join gets: map_quarantined, or
// map_unavailable for unknown, starting, stopped and unhealthy maps.
func (s *Server) handleMapWS(c echo.Context) error {
	id := c.Param("id")
	inst, err := s.Maps.Gate(id)
	if err != nil {
		return err
	}
	target := &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(inst.GamePort))}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path, pr.Out.URL.RawPath, pr.Out.URL.RawQuery = mapWSPath, "", ""
			// The map checks a browser's Origin against the host the page came from,
			// which is this listener's, not its loopback address.
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.Log.Warn("map websocket proxy failed", "instance", id, "err", err)
			// Before the upgrade the answer is still ours to write; after it, the
			// connection is the map's and there is nothing to answer.
			c.Error(apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q did not answer", id))
		},
	}
	proxy.ServeHTTP(c.Response(), c.Request())
	return nil
}
