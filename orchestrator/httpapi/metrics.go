package httpapi

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// PathMapMetrics is where Prometheus finds the maps, on the control listener:
// GET PathMapMetrics answers the list of targets in Prometheus' HTTP service-discovery
// format (http_sd_configs), one per running map, and GET PathMapMetrics/{instanceId}
// serves that map's metrics, fetched from its control listener with the orchestrator's
// credential for its container.
const PathMapMetrics = "/metrics/maps"

// Scrape limits of the map metrics proxy. A scrape is bounded by Prometheus' own
// timeout (its X-Prometheus-Scrape-Timeout-Seconds header) within these; a map's answer
// larger than maxMapMetricsBytes is cut, which Prometheus reports as a failed scrape.
const (
	defaultScrapeTimeout = 10 * time.Second
	maxScrapeTimeout     = time.Minute
	maxMapMetricsBytes   = 32 << 20
)

// MapTargets finds the control listener of the container running a map instance.
// *supervise.Supervisor implements it.
type MapTargets interface {
	// ControlTarget returns the base URL of the control listener of the container that
	// runs instanceID and the credential to present there. Error codes: ENOTFOUND,
	// EMAPUNAVAILABLE.
	ControlTarget(instanceID string) (url, credential string, err error)
}

// sdTargetGroup is one entry of Prometheus' HTTP service-discovery answer.
type sdTargetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// requireMetrics is the middleware of the metrics routes: the request carries the
// metrics credential as a bearer token (what Prometheus sends with `authorization`) or
// the root secret in httpkit.SecretHeader (what an operator's curl sends).
func (s *Server) requireMetrics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header
		// Some Prometheus versions send a discovery request's credential without its
		// "Bearer" type; the credential's own prefix keeps that unambiguous.
		tok := strings.TrimSpace(h.Get(echo.HeaderAuthorization))
		if tok, _ = strings.CutPrefix(tok, "Bearer "); tok != "" && s.Root.IsMetricsCredential(tok) {
			return next(c)
		}
		if s.Root.IsRoot(h.Get(httpkit.SecretHeader)) {
			return next(c)
		}
		return apierr.Errorf(apierr.EUNAUTHORIZED, "missing or wrong metrics credential (Authorization: Bearer) or %s header", httpkit.SecretHeader)
	}
}

// metricsRoutes registers the orchestrator's metrics and the discovery and proxy of the
// maps' metrics.
func (s *Server) metricsRoutes(g *echo.Group) {
	g.GET(httpkit.PathMetrics, s.handleMetrics)
	g.GET(PathMapMetrics, s.handleMapTargets)
	g.GET(PathMapMetrics+"/:id", s.handleMapMetrics)
}

// handleMapTargets lists every map instance that has a running container, as a target
// whose address is the one this request reached (so Prometheus scrapes the proxy
// through the same address it discovers through) and whose metrics path is the proxy's
// route for that instance. The labels name the instance and its map.
func (s *Server) handleMapTargets(c echo.Context) error {
	host := c.Request().Host
	if host == "" {
		host = strings.TrimPrefix(s.ControlURL(), "http://")
	}
	groups := []sdTargetGroup{}
	for _, in := range s.Maps.Instances() {
		if in.ControlPort == 0 {
			continue
		}
		groups = append(groups, sdTargetGroup{Targets: []string{host}, Labels: map[string]string{
			"__metrics_path__": PathMapMetrics + "/" + in.ID,
			"instance":         in.ID,
			"map":              in.MapID,
		}})
	}
	return c.JSON(http.StatusOK, groups)
}

// handleMapMetrics fetches the metrics of one map from its control listener and passes
// them through unchanged (format and compression as Prometheus negotiated them).
func (s *Server) handleMapMetrics(c echo.Context) error {
	if s.MapTargets == nil {
		return apierr.Errorf(apierr.ENOTFOUND, "map metrics are not served here")
	}
	id := c.Param("id")
	if !record.ValidName(id) {
		return apierr.Errorf(apierr.EBADREQUEST, "instance id must be %s", record.IDRule)
	}
	url, cred, err := s.MapTargets.ControlTarget(id)
	if err != nil {
		return err
	}
	r := c.Request()
	ctx, cancel := context.WithTimeout(r.Context(), scrapeTimeout(r))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+httpkit.PathMetrics, nil)
	if err != nil {
		return err
	}
	req.Header.Set(httpkit.SecretHeader, cred)
	for _, h := range []string{echo.HeaderAccept, echo.HeaderAcceptEncoding} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := s.scrapeClient.Do(req)
	if err != nil {
		return apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q does not answer for its metrics: %v", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q answered its metrics with status %d", id, resp.StatusCode)
	}
	for _, h := range []string{echo.HeaderContentType, echo.HeaderContentEncoding} {
		if v := resp.Header.Get(h); v != "" {
			c.Response().Header().Set(h, v)
		}
	}
	c.Response().WriteHeader(http.StatusOK)
	_, _ = io.Copy(c.Response(), io.LimitReader(resp.Body, maxMapMetricsBytes)) // the status is sent: a cut body is all that can tell
	return nil
}

// scrapeTimeout is Prometheus' timeout for this scrape, within maxScrapeTimeout.
func scrapeTimeout(r *http.Request) time.Duration {
	secs, err := strconv.ParseFloat(r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds"), 64)
	if err != nil || secs <= 0 {
		return defaultScrapeTimeout
	}
	return min(time.Duration(secs*float64(time.Second)), maxScrapeTimeout)
}

// newScrapeClient is the HTTP client of the proxy: straight to loopback, never through
// a proxy from the environment, and without decompressing (the map's gzip goes through).
func newScrapeClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DisableCompression = true
	// A killed map's connection never sees a FIN (its network namespace is gone):
	// closed after 10 s idle instead of the default 90, so the orchestrator's open
	// files come back soon after a map crash. Scrapes of live maps reconnect at worst.
	t.IdleConnTimeout = 10 * time.Second
	return &http.Client{Transport: t}
}
