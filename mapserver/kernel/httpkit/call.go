package httpkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
		return AnswerError(method, url, resp.StatusCode, buf)
	}
	if out != nil {
		if err := json.Unmarshal(buf, out); err != nil {
			return fmt.Errorf("decode %s %s answer: %w", method, url, err)
		}
	}
	return nil
}

// AnswerError returns the error an answer other than 2xx stands for: the *apierr.Error
// its body carries ({"error": {"code", "message"}}, as ErrorHandler writes it), else
// EUNAVAILABLE naming the request and the status, so that every answer without
// mapyard's error body is one a caller may retry.
func AnswerError(method, url string, status int, body []byte) *apierr.Error {
	var e ErrorResponse
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return &e.Error
	}
	return apierr.Errorf(apierr.EUNAVAILABLE, "%s %s: status %d", method, url, status)
}

// Transient reports whether a call that failed with err may succeed if it is made
// again, the one answer every caller that retries (the map's contract client, its
// outbox) goes by:
//
//   - no answer at all (a transport failure, or an answer without mapyard's error
//     body, which Call returns as EUNAVAILABLE): transient;
//   - a 500 internal, a 503 unavailable or a 507 storage_full: transient, the
//     server's state at that moment;
//   - a 4xx: not transient, the same request fails the same way again;
//   - a 5xx whose code is the server's answer rather than a fault (not_implemented:
//     it cannot do it; map_unavailable, map_quarantined: a map it will not send a
//     player to; capacity: a bound it holds to): not transient, asking again within
//     seconds changes nothing, and the caller must act on the answer;
//   - the caller's own context ending: not transient, the caller gave up.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var e *apierr.Error
	if !errors.As(err, &e) {
		return true
	}
	switch e.Code {
	case apierr.ENOTIMPLEMENTED, apierr.EMAPUNAVAILABLE, apierr.EMAPQUARANTINED, apierr.ECAPACITY:
		return false
	}
	return apierr.Status(e.Code) >= http.StatusInternalServerError
}
