// Package routetable is what the orchestrator and its public edge agree on about maps:
// the route table the edge watches, behind the edge's credential, to learn where each
// map's players go, and the client that watches it. It is apart from the map contract
// (mapserver/kernel/mapcontract): maps never call this route, and the edge never calls a
// map's. The public routes the edge forwards are package public's.
package routetable

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
)

// PathRoutes is the orchestrator's route-table watch, served on the control listener
// behind the secret: the edge long-polls it to learn where each map's players go.
const PathRoutes = "/orch/routes"

// Route watch parameters. A watch answers as soon as the table differs from the version
// the caller holds, or after DefaultRouteWait with the same table.
const (
	DefaultRouteWait = 25 * time.Second
	MaxRouteWait     = 60 * time.Second
)

// Route is one map instance as the edge needs it: the loopback port its game listener
// is published on and the supervisor's readiness gate verdict, so the edge refuses
// exactly what the orchestrator would (Code "" means the map takes players now).
type Route struct {
	InstanceID string `json:"instanceId"`
	State      string `json:"state"`
	GamePort   int    `json:"gamePort,omitempty"`
	// GameAddr is the map's game listener on its address on the map network
	// (host:port), reachable from the host without the userland proxy behind the
	// published GamePort; empty when the orchestrator does not know it.
	GameAddr string `json:"gameAddr,omitempty"`
	// Generation names the container the route leads to; it changes when the instance
	// gets a new container. A map hands a player over to a generation
	// (edgelink.KindMove), and the edge moves the player only to a route of it.
	Generation string `json:"generation,omitempty"`
	// Code and Message are the gate's refusal (map_quarantined, map_unavailable), empty
	// when the instance takes players.
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// Open reports whether the route takes players now.
func (r Route) Open() bool { return r.Code == "" && r.GamePort != 0 }

// RouteTable is every instance's route at one version. Version is opaque: it changes
// whenever the table does and also across orchestrator restarts, so a caller only ever
// compares it for equality. Ready says whether the default map takes players (what the
// orchestrator's /readyz says), so the edge's own readiness can include it.
type RouteTable struct {
	Version string  `json:"version"`
	Ready   bool    `json:"ready"`
	Routes  []Route `json:"routes"`
}

// Client watches the orchestrator's route table. The edge uses it.
type Client struct {
	// BaseURL of the orchestrator's control listener, e.g. http://127.0.0.1:9000.
	BaseURL string
	// Secret is the edge's credential, sent in httpkit.SecretHeader.
	Secret string
	// HTTP is the client used; its timeout, if any, must be longer than a watch's wait.
	HTTP *http.Client
}

// NewClient returns a Client for the control listener at baseURL, with no timeout of
// its own: a watch is bounded by its wait and its caller's context.
func NewClient(baseURL, secret string) *Client {
	return &Client{BaseURL: baseURL, Secret: secret, HTTP: &http.Client{}}
}

// WatchRoutes returns the orchestrator's route table once its version differs from
// after (at once for an empty after), or the same table after wait. The client's own
// timeout must be longer than wait; the edge uses one without a timeout and bounds the
// call with ctx.
func (c *Client) WatchRoutes(ctx context.Context, after string, wait time.Duration) (RouteTable, error) {
	q := url.Values{"after": {after}, "waitMs": {strconv.FormatInt(wait.Milliseconds(), 10)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+PathRoutes+"?"+q.Encode(), nil)
	if err != nil {
		return RouteTable{}, fmt.Errorf("request %s: %w", PathRoutes, err)
	}
	req.Header.Set(httpkit.SecretHeader, c.Secret)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return RouteTable{}, fmt.Errorf("call %s: %w", PathRoutes, err)
	}
	defer resp.Body.Close()
	buf, err := io.ReadAll(io.LimitReader(resp.Body, httpkit.DefaultMaxBodySize))
	if err != nil {
		return RouteTable{}, fmt.Errorf("read %s answer: %w", PathRoutes, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e httpkit.ErrorResponse
		if json.Unmarshal(buf, &e) == nil && e.Error.Code != "" {
			return RouteTable{}, &e.Error
		}
		return RouteTable{}, fmt.Errorf("call %s: status %d", PathRoutes, resp.StatusCode)
	}
	var t RouteTable
	if err := json.Unmarshal(buf, &t); err != nil {
		return RouteTable{}, fmt.Errorf("decode %s answer: %w", PathRoutes, err)
	}
	return t, nil
}
