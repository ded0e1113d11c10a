package control

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/mapyard/mapyard/orchestrator"
)

// Client calls the orchestrator's side of the control RPC. Map servers use it.
type Client struct {
	// BaseURL of the orchestrator's control listener, e.g. http://host.docker.internal:9000.
	BaseURL string
	// Secret is sent in SecretHeader on every request.
	Secret string
	// HTTP is the client used; NewClient sets one with a timeout.
	HTTP *http.Client
}

// NewClient returns a Client for the control listener at baseURL.
func NewClient(baseURL, secret string) *Client {
	return &Client{BaseURL: baseURL, Secret: secret, HTTP: &http.Client{Timeout: 5 * time.Second}}
}

// MapReady registers a started map server. It is idempotent: the orchestrator treats a
// repeated registration of the same instance as the same fact.
func (c *Client) MapReady(ctx context.Context, r orchestrator.MapReady) error {
	return c.do(ctx, PathMapReady, r, nil)
}

// Heartbeat tells the orchestrator the map is alive and how many players it holds.
func (c *Client) Heartbeat(ctx context.Context, h Heartbeat) (HeartbeatAnswer, error) {
	var a HeartbeatAnswer
	err := c.do(ctx, PathMapHeartbeat, h, &a)
	return a, err
}

// do POSTs in as JSON and decodes a 2xx answer into out (when not nil). Error answers
// come back as *orchestrator.Error with the server's code and message.
func (c *Client) do(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("request %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SecretHeader, c.Secret)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("call %s: %w", path, err)
	}
	defer resp.Body.Close()
	buf, err := io.ReadAll(io.LimitReader(resp.Body, DefaultMaxBodySize))
	if err != nil {
		return fmt.Errorf("read %s answer: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e ErrorResponse
		if json.Unmarshal(buf, &e) == nil && e.Error.Code != "" {
			return &e.Error
		}
		return fmt.Errorf("call %s: status %d", path, resp.StatusCode)
	}
	if out != nil {
		if err := json.Unmarshal(buf, out); err != nil {
			return fmt.Errorf("decode %s answer: %w", path, err)
		}
	}
	return nil
}
