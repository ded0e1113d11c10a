package control

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/mapyard/mapyard/orchestrator/apierr"
)

// Map-side routes (served on each map server's control listener).
const (
	PathStartInstance = "/control/start-instance"
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
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode start-instance: %w", err)
	}
	return c.call(ctx, http.MethodPost, baseURL+PathStartInstance, body, nil)
}

func (c *MapClient) call(ctx context.Context, method, url string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(SecretHeader, c.Secret)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	buf, _ := io.ReadAll(io.LimitReader(resp.Body, DefaultMaxBodySize))
	if resp.StatusCode/100 != 2 {
		var e ErrorResponse
		if json.Unmarshal(buf, &e) == nil && e.Error.Code != "" {
			return &e.Error
		}
		return apierr.Errorf(apierr.EUNAVAILABLE, "%s %s: status %d", method, url, resp.StatusCode)
	}
	if out != nil {
		if err := json.Unmarshal(buf, out); err != nil {
			return fmt.Errorf("decode %s %s answer: %w", method, url, err)
		}
	}
	return nil
}
