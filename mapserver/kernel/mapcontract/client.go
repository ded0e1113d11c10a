package mapcontract

import (
	"context"
	"net/http"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// Client calls the orchestrator's side of the control RPC. Map servers use it.
type Client struct {
	// BaseURL of the orchestrator's control listener, e.g. http://host.docker.internal:9000.
	BaseURL string
	// Secret is the map's credential, sent in httpkit.SecretHeader on every request.
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
func (c *Client) MapReady(ctx context.Context, r MapReady) error {
	return c.retry(ctx, PathMapReady, r, nil)
}

// Heartbeat tells the orchestrator the map is alive and how many players it holds.
// It is not retried: the next heartbeat is the retry.
func (c *Client) Heartbeat(ctx context.Context, h Heartbeat) (HeartbeatAnswer, error) {
	var a HeartbeatAnswer
	err := c.do(ctx, PathMapHeartbeat, h, &a)
	return a, err
}

// Redeem redeems a player's join ticket or transfer token for this map. It is never
// retried: a redeem that reached the orchestrator used the token, and a retry would be
// answered ticket_used.
func (c *Client) Redeem(ctx context.Context, r RedeemRequest) (*RedeemResult, error) {
	var res RedeemResult
	if err := c.do(ctx, PathRedeem, r, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// RequestTransfer asks to move a character to another map. Retried: the map-chosen
// TransferID makes a repeat the same request, answered with the same token.
func (c *Client) RequestTransfer(ctx context.Context, r TransferRequest) (*TransferAnswer, error) {
	var a TransferAnswer
	if err := c.retry(ctx, PathRequestTransfer, r, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// TransferResult reports, as the destination, whether a transferred player spawned.
// Retried: reporting the same result twice is harmless.
func (c *Client) TransferResult(ctx context.Context, r TransferResult) error {
	return c.retry(ctx, PathTransferResult, r, nil)
}

// PersistSnapshot pushes one snapshot partition. Retried: ingest is idempotent by
// revision.
func (c *Client) PersistSnapshot(ctx context.Context, r PersistSnapshot) (PersistSnapshotAnswer, error) {
	return retried[PersistSnapshotAnswer](ctx, c, PathPersistSnapshot, r)
}

// PersistCritical commits a critical event and returns once it is durable. Retried:
// events are idempotent by EventID, and a retry returns the first commit's ack.
func (c *Client) PersistCritical(ctx context.Context, ev record.CriticalEvent) (record.CriticalAck, error) {
	return retried[record.CriticalAck](ctx, c, PathPersistCritical, ev)
}

// retried is retry for a call answered with a value of type A.
func retried[A any](ctx context.Context, c *Client, path string, req any) (A, error) {
	var a A
	err := c.retry(ctx, path, req, &a)
	return a, err
}

// Retry policy of idempotent calls: a few attempts with doubling delays, only after
// failures that may be transient (httpkit.Transient: no answer, or a 5xx that is a
// fault rather than an answer).
const (
	retryAttempts = 4
	retryFirst    = 100 * time.Millisecond
)

func (c *Client) retry(ctx context.Context, path string, in, out any) error {
	delay := retryFirst
	for attempt := 1; ; attempt++ {
		err := c.do(ctx, path, in, out)
		if err == nil || attempt == retryAttempts || !httpkit.Transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay *= 2
	}
}

// do POSTs in to the orchestrator's path with httpkit.Call.
func (c *Client) do(ctx context.Context, path string, in, out any) error {
	return httpkit.Call(ctx, c.HTTP, http.MethodPost, c.BaseURL+path, c.Secret, in, out)
}
