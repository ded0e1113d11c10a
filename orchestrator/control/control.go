// Package control is the contract of mapyard's control RPC: HTTP+JSON between the
// orchestrator and its map servers, on host-local listeners only, every request
// carrying the shared secret. It holds the route names, the secret check, strict JSON
// decoding, the error mapping both sides use, and the typed client that map servers use
// to call the orchestrator. The contract lives with the orchestrator, which serves it.
package control

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/mapyard/mapyard/orchestrator"
)

// SecretHeader carries the internal shared secret on every control request.
const SecretHeader = "X-Mapyard-Secret"

// Orchestrator-side routes (served on the control listener).
const (
	PathMapReady        = "/orch/map-ready"
	PathMapHeartbeat    = "/orch/map-heartbeat"
	PathRedeem          = "/orch/redeem"
	PathRequestTransfer = "/orch/request-transfer"
	PathTransferResult  = "/orch/transfer-result"
	PathPersistSnapshot = "/orch/persist-snapshot"
	PathPersistCritical = "/orch/persist-critical-event"
	PathAdminMaps       = "/admin/maps"
	PathMetrics         = "/metrics"
	DefaultMaxBodySize  = 1 << 20
)

// Map-side routes (served on each map's control listener) and the public join route.
const (
	PathHealth = "/health"
	PathJoin   = "/api/v1/join"
)

// PersistSnapshot is the body of POST /orch/persist-snapshot. Epoch is the lease epoch
// the map holds for the character of a "character:<id>" partition (ignored otherwise).
type PersistSnapshot struct {
	InstanceID string                        `json:"instanceId"`
	Partition  string                        `json:"partition"`
	Revision   int64                         `json:"revision"`
	Epoch      int64                         `json:"epoch,omitempty"`
	Envelope   orchestrator.SnapshotEnvelope `json:"envelope"`
}

// PersistSnapshotAnswer says whether the revision was newer than the one held; an older
// or equal one is ignored, which makes retries harmless.
type PersistSnapshotAnswer struct {
	Accepted bool `json:"accepted"`
}

// Heartbeat is what a map server sends every MAP_HEARTBEAT_MS.
type Heartbeat struct {
	InstanceID string `json:"instanceId"`
	Players    int    `json:"players"`
	Tick       uint64 `json:"tick"`
}

// HeartbeatAnswer tells a map whether the orchestrator knows it as registered; a map
// that is not registers again with MapReady.
type HeartbeatAnswer struct {
	Registered bool `json:"registered"`
}

// ErrorResponse is the body of every error answer: {"error": {"code", "message"}}.
type ErrorResponse struct {
	Error orchestrator.Error `json:"error"`
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
				return orchestrator.Errorf(orchestrator.EUNAUTHORIZED, "missing or wrong %s header", SecretHeader)
			}
			return next(c)
		}
	}
}

// statuses maps error codes to HTTP statuses; codes not listed are 500.
var statuses = map[string]int{
	orchestrator.EBADREQUEST:      http.StatusBadRequest,
	orchestrator.EINVALIDENVELOPE: http.StatusBadRequest,
	orchestrator.EHASHMISMATCH:    http.StatusBadRequest,
	orchestrator.ESCHEMAVERSION:   http.StatusBadRequest,
	orchestrator.EUNAUTHORIZED:    http.StatusUnauthorized,
	orchestrator.EFORBIDDEN:       http.StatusForbidden,
	orchestrator.ERATELIMITED:     http.StatusTooManyRequests,
	orchestrator.ECAPACITY:        http.StatusServiceUnavailable,
	orchestrator.ETICKETINVALID:   http.StatusUnauthorized,
	orchestrator.ETICKETEXPIRED:   http.StatusUnauthorized,
	orchestrator.ETICKETUSED:      http.StatusConflict,
	orchestrator.EWRONGMAP:        http.StatusConflict,
	orchestrator.ECONFLICT:        http.StatusConflict,
	orchestrator.ENOTFOUND:        http.StatusNotFound,
	orchestrator.ETOOLARGE:        http.StatusRequestEntityTooLarge,
	orchestrator.EMAPQUARANTINED:  http.StatusServiceUnavailable,
	orchestrator.EMAPUNAVAILABLE:  http.StatusServiceUnavailable,
	orchestrator.EUNAVAILABLE:     http.StatusServiceUnavailable,
	orchestrator.ENOTIMPLEMENTED:  http.StatusNotImplemented,
}

// Status returns the HTTP status for an error code.
func Status(code string) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
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
		code, msg := orchestrator.ErrorCode(err), orchestrator.ErrorMessage(err)
		status := Status(code)
		var he *echo.HTTPError
		if errors.As(err, &he) {
			status, code, msg = he.Code, httpCode(he.Code), fmt.Sprint(he.Message)
		} else if code == orchestrator.EINTERNAL {
			log.Error("request failed", "method", c.Request().Method, "path", c.Path(), "err", err)
		}
		var werr error
		if c.Request().Method == http.MethodHead {
			werr = c.NoContent(status)
		} else {
			werr = c.JSON(status, ErrorResponse{Error: orchestrator.Error{Code: code, Message: msg}})
		}
		if werr != nil {
			log.Debug("write error response", "err", werr)
		}
	}
}

func httpCode(status int) string {
	switch {
	case status == http.StatusNotFound:
		return orchestrator.ENOTFOUND
	case status == http.StatusRequestEntityTooLarge:
		return orchestrator.ETOOLARGE
	case status == http.StatusUnauthorized:
		return orchestrator.EUNAUTHORIZED
	case status < 500:
		return orchestrator.EBADREQUEST
	default:
		return orchestrator.EINTERNAL
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
		return orchestrator.Errorf(orchestrator.EBADREQUEST, "read body: %v", err)
	}
	if int64(len(body)) > limit {
		return orchestrator.Errorf(orchestrator.ETOOLARGE, "body larger than %d bytes", limit)
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
		return orchestrator.Errorf(orchestrator.EBADREQUEST, "invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return orchestrator.Errorf(orchestrator.EBADREQUEST, "invalid JSON: trailing data after the value")
	}
	return nil
}
