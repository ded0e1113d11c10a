package httpkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// Call makes one control request and is the only place either side of the control RPC
// speaks HTTP as a client: it sends in as JSON (no body when in is nil) with the shared
// secret, and decodes a 2xx answer into out (when not nil). An error answer comes back as
// the *apierr.Error the server sent; an answer without one is EUNAVAILABLE, so callers
// can retry it like any other 5xx.
func Call(ctx context.Context, hc *http.Client, method, url, secret string, in, out any) error {
	var body io.Reader
	if in != nil {
		buf, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, url, err)
		}
		body = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return fmt.Errorf("request %s %s: %w", method, url, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(SecretHeader, secret)
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	buf, err := io.ReadAll(io.LimitReader(resp.Body, DefaultMaxBodySize))
	if err != nil {
		return fmt.Errorf("read %s %s answer: %w", method, url, err)
	}
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
