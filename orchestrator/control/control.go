// Package control is the contract of mapyard's control RPC: HTTP+JSON between the
// orchestrator and its map servers, on host-local listeners only, every request
// carrying the shared secret. It holds the route names, the secret check, strict JSON
// decoding, the error mapping both sides use, the one HTTP call helper, the /orch/*
// messages and the typed client that map servers use to call the orchestrator. The
// contract lives with the orchestrator, which serves it; what a map serves lives in
// mapserver/mapcontrol. It imports no other mapyard package but apierr and
// mapserver/items (the item rules both sides share: pure, standard library only), so a
// map server can depend on it without depending on the orchestrator.
//
// # Critical events and items
//
// Every item route demands a map credential and acts only for the caller's instance.
//
//   - POST /orch/persist-critical-event (CriticalEvent → CriticalAck): durable before
//     the answer, idempotent by eventId. Item kinds (item_pickup, item_drop, item_trade,
//     item_consume, item_recover) carry a mapserver/items Payload and, in epochs, the
//     lease epoch of every character they give an item to or take one from; the item
//     rules decide them, and a refusal is 409 with the rule's item_* code.
//   - POST /orch/persist-critical-events (CriticalBatch → CriticalBatchAnswer): up to
//     MaxCriticalBatch events of the instance in one request, each decided as if sent
//     alone (its own ack or error in Results, in order) and all sharing group commits;
//     what a map sends once per tick. Events of one batch are decided in no particular
//     order, so a map never batches two events about the same item.
//   - POST /orch/instance-items (InstanceItemsRequest → InstanceItemsAnswer): called by a
//     map at start, after map-ready. It seeds the ordinary items the map's generator put
//     on its ground (ids derived from the seed), keeping the stored state of any id
//     already known, and answers the instance's ownership state and the critical-item
//     policies anchored there, so a restarted map rebuilds ownership without
//     duplicating an item. Retried safely.
//   - POST /orch/character-items (CharacterItemsRequest → CharacterItemsAnswer): the
//     items of a character arriving in the map, for the lease holder only.
//   - POST /orch/item-policies (ItemPoliciesRequest → ItemPoliciesAnswer): the policies
//     anchored in the instance, reloaded to pick up an operator's edit.
//
// On the control listener with the root secret, operators edit the policies:
// GET /admin/item-policies, GET, PUT and DELETE /admin/item-policies/{itemId} (a body is
// an items.Policy, strictly decoded and validated; 201 when created, 200 when replaced,
// 204 when deleted), and read the append-only recovery audit with
// GET /admin/item-recoveries?itemId=&limit=.
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
	"github.com/mapyard/mapyard/orchestrator/apierr"
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
	PathAdminSessions   = "/admin/sessions"
	PathAdminCleanup    = "/admin/cleanup"
	PathAdminCharacters = "/admin/characters"
	PathMetrics         = "/metrics"
	DefaultMaxBodySize  = 1 << 20
)

// PathJoin is the orchestrator's public join route.
const PathJoin = "/api/v1/join"

// PathCharacters is the public character API of an identity (Authorization: Bearer
// <authKey>): GET lists, POST creates; PathCharacters/{id}/select selects and DELETE
// PathCharacters/{id} deletes. The edge forwards it like joins.
const PathCharacters = "/api/v1/characters"

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
