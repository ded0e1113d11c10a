// Package mapcontrol is the contract a map server serves on its control listener: the
// /control/* routes and /health, their messages, and the typed client the orchestrator
// calls them with. It lives with the map server, which serves it, and shares the
// secret header, error answers and HTTP call helper of orchestrator/control.
package mapcontrol

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/mapyard/mapyard/orchestrator/control"
)

// Map-side routes (served on each map server's control listener).
const (
	PathStartInstance = "/control/start-instance"
	PathHealth        = "/health"
)

// StartInstance tells a map server which instance it runs and with what MapConfig. A
// blank (warm pool) map takes on the instance it is given; a map started for an
// instance accepts its own instance id again (the call is idempotent) and refuses any
// other with code "conflict".
type StartInstance struct {
	InstanceID string `json:"instanceId"`
	MapID      string `json:"mapId"`
	// Config is the instance's MapConfig as JSON. The orchestrator keeps it opaque; the
	// map server owns its type.
	Config json.RawMessage `json:"config,omitempty"`
}

// MapHealth is the answer of a map's GET /health: whether it is healthy and which
// instance it runs (a blank warm-pool map reports its pool id).
type MapHealth struct {
	Status     string `json:"status"`
	InstanceID string `json:"instanceId"`
	MapID      string `json:"mapId"`
	Version    string `json:"version"`
	// WorldHash is the content hash of the static world generated from the instance's
	// MapConfig, empty until generation finished; browsers recompute and compare it.
	WorldHash string `json:"worldHash,omitempty"`
}

// MapClient calls the map side of the control RPC on a map's published control port.
// The orchestrator's supervisor uses it for health probes and to hand out instances.
type MapClient struct {
	Secret string
	HTTP   *http.Client
}

// NewMapClient returns a MapClient whose requests time out after timeout.
func NewMapClient(secret string, timeout time.Duration) *MapClient {
	return &MapClient{Secret: secret, HTTP: &http.Client{Timeout: timeout, Transport: &http.Transport{
		MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second,
	}}}
}

// Health asks the map at baseURL for GET /health. Any non-2xx answer is an error.
func (c *MapClient) Health(ctx context.Context, baseURL string) (MapHealth, error) {
	var h MapHealth
	err := c.call(ctx, http.MethodGet, baseURL+PathHealth, nil, &h)
	return h, err
}

// StartInstance posts r to the map at baseURL. Error codes from the map: EBADREQUEST,
// ECONFLICT (the map already runs another instance).
func (c *MapClient) StartInstance(ctx context.Context, baseURL string, r StartInstance) error {
	return c.call(ctx, http.MethodPost, baseURL+PathStartInstance, r, nil)
}

func (c *MapClient) call(ctx context.Context, method, url string, in, out any) error {
	return control.Call(ctx, c.HTTP, method, url, c.Secret, in, out)
}
