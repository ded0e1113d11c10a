// Package httpkit is the HTTP plumbing every mapyard listener and caller shares, on
// both sides of both control RPCs and on the public API: the shared-secret header and
// its check, strict JSON decoding, the one error handler and its body
// ({"error":{"code","message"}}), the one client call helper, echo's set-up and the
// servers' lifecycle. It knows no route and no message: the contracts built on it are
// mapserver/kernel/mapcontract (what maps call), mapserver/kernel/mapcontract (what maps serve)
// and mapserver/kernel/routetable (what the edge calls). It imports no other mapyard package
// but apierr, so a map server can depend on it without depending on the orchestrator.
package httpkit

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// SecretHeader carries the internal shared secret on every control request.
const SecretHeader = "X-Mapyard-Secret"

// PathMetrics is where every mapyard binary serves its Prometheus metrics: the
// orchestrator and maps on their control listeners, the edge on its metrics listener.
const PathMetrics = "/metrics"

// DefaultMaxBodySize bounds a request or answer body unless a route says otherwise.
const DefaultMaxBodySize = 1 << 20

// ErrorResponse is the body of every error answer: {"error": {"code", "message"}}.
type ErrorResponse struct {
	Error apierr.Error `json:"error"`
}

// RequireSecret returns middleware that refuses, with 401 and code "unauthorized", any
// request whose SecretHeader differs from secret. The comparison takes constant time so
// the secret cannot be guessed byte by byte from response timing.
func RequireSecret(secret string) echo.MiddlewareFunc {
	want := []byte(secret)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			got := []byte(c.Request().Header.Get(SecretHeader))
			if len(want) == 0 || subtle.ConstantTimeCompare(got, want) != 1 {
				return apierr.Errorf(apierr.EUNAUTHORIZED, "missing or wrong %s header", SecretHeader)
			}
			return next(c)
		}
	}
}

// ErrorHandler returns echo's error handler for both listeners of both binaries: every
// error becomes {"error": {"code","message"}} with the status of its code. Internal
// errors are logged with their cause and answered with a generic message; echo's own
// errors (404 route, 405 method) keep their status.
func ErrorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		code, msg := apierr.Code(err), apierr.Message(err)
		status := apierr.Status(code)
		var he *echo.HTTPError
		if errors.As(err, &he) {
			status, code, msg = he.Code, httpCode(he.Code), fmt.Sprint(he.Message)
		} else if code == apierr.EINTERNAL {
			log.Error("request failed", "method", c.Request().Method, "path", c.Path(), "err", err)
		}
		var werr error
		if c.Request().Method == http.MethodHead {
			werr = c.NoContent(status)
		} else {
			werr = c.JSON(status, ErrorResponse{Error: apierr.Error{Code: code, Message: msg}})
		}
		if werr != nil {
			log.Debug("write error response", "err", werr)
		}
	}
}

func httpCode(status int) string {
	switch {
	case status == http.StatusNotFound:
		return apierr.ENOTFOUND
	case status == http.StatusRequestEntityTooLarge:
		return apierr.ETOOLARGE
	case status == http.StatusUnauthorized:
		return apierr.EUNAUTHORIZED
	case status == http.StatusMethodNotAllowed:
		return apierr.EMETHODNOTALLOWED
	case status == http.StatusUnsupportedMediaType:
		return apierr.EUNSUPPORTEDMEDIA
	case status == http.StatusForbidden:
		return apierr.EFORBIDDEN
	case status < 500:
		return apierr.EBADREQUEST
	default:
		return apierr.EINTERNAL
	}
}

// BodyReadTimeout bounds how long DecodeJSON waits for a request body.
const BodyReadTimeout = 10 * time.Second

// DecodeJSON strictly decodes the request body into v: at most limit bytes, no unknown
// fields, exactly one JSON value. Every failure is an EBADREQUEST (or ETOOLARGE) error
// that says what was wrong, so a map developer can fix the request.
func DecodeJSON(c echo.Context, v any, limit int64) error {
	// A body that trickles in is cut off: no client holds a handler forever.
	_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(BodyReadTimeout))
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, limit+1))
	if err != nil {
		return apierr.Errorf(apierr.EBADREQUEST, "read body: %v", err)
	}
	if int64(len(body)) > limit {
		return apierr.Errorf(apierr.ETOOLARGE, "body larger than %d bytes", limit)
	}
	return Unmarshal(body, v)
}

// Unmarshal is the strict JSON decoding of DecodeJSON over a byte slice. An empty body
// means an object with no fields (a join without a key is just `POST /api/v1/join`).
func Unmarshal(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apierr.Errorf(apierr.EBADREQUEST, "invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return apierr.Errorf(apierr.EBADREQUEST, "invalid JSON: trailing data after the value")
	}
	return nil
}

// HeaderHasToken reports whether the comma-separated header name of h holds token, in
// any case (Connection: keep-alive, Upgrade).
func HeaderHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
