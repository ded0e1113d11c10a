// Package edgeapi is what the orchestrator and its public edge agree on: the public
// routes the edge forwards to the orchestrator as they come (joins and the character
// API), and the route table the edge watches, behind the edge's credential, to learn
// where each map's players go. It is apart from the map contract (orchestrator/
// mapcontract): maps never call these routes, and the edge never calls a map's.
package edgeapi

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

// PathJoin is the orchestrator's public join route.
const PathJoin = "/api/v1/join"

// WSPath is the public WebSocket path of a map instance: the edge routes
// WSPath(":id") to the map's players, and the orchestrator names it in every join and
// transfer answer, so the two agree on it by construction.
func WSPath(instanceID string) string { return "/maps/" + instanceID + "/ws" }

// PathCharacters is the public character API of an identity (Authorization: Bearer
// <authKey>): GET lists, POST creates; PathCharacters/{id}/select selects and DELETE
// PathCharacters/{id} deletes. The edge forwards it like joins.
const PathCharacters = "/api/v1/characters"

// MaxPlayerBody bounds the body of a player's call (a join, the character API), at the
// edge and at the orchestrator alike. It is far above any valid body (a few hundred
// bytes) on purpose: a name or key that is merely too long is refused for what it is
// (400 bad_request, naming the rule), and only a body no client would send is
// too_large (413).
const MaxPlayerBody = 64 << 10

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
