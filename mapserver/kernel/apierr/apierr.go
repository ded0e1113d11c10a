// Package apierr holds mapyard's one application error type, its stable codes and the
// HTTP status of each code. It is a leaf (standard library only) so that the
// orchestrator, the map server and both control contracts can share it without
// importing one another.
package apierr

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Error codes shared by every part of mapyard. They are part of the public contract:
// clients and map servers branch on them, so a code is never renamed or reused.
const (
	ECONFLICT        = "conflict"
	EBADREQUEST      = "bad_request"
	EUNAUTHORIZED    = "unauthorized"
	ENOTFOUND        = "not_found"
	ETICKETINVALID   = "ticket_invalid"
	ETICKETEXPIRED   = "ticket_expired"
	ETICKETUSED      = "ticket_used"
	EWRONGMAP        = "wrong_map"
	EMAPQUARANTINED  = "map_quarantined"
	EMAPUNAVAILABLE  = "map_unavailable"
	ETOOLARGE        = "too_large"
	EINTERNAL        = "internal"
	ENOTIMPLEMENTED  = "not_implemented"
	EUNAVAILABLE     = "unavailable"
	ESCHEMAVERSION   = "schema_version"
	EHASHMISMATCH    = "hash_mismatch"
	EINVALIDENVELOPE = "invalid_envelope"
	// ERATELIMITED refuses a client address over its request rate; Retry-After says when
	// to come back.
	ERATELIMITED = "rate_limited"
	// ECAPACITY refuses what would grow state held in memory past its configured bound
	// (for example disposable guest characters); it clears as players leave.
	ECAPACITY = "capacity"

	// Codes of HTTP-level refusals, so that they too carry a code a client can branch on.
	EMETHODNOTALLOWED = "method_not_allowed"
	EUNSUPPORTEDMEDIA = "unsupported_media_type"
	// EITEMNOTFOUND is the item rules' code for an item that does not exist, never
	// spawned or used up (mapserver/kernel/items.CodeNotFound). It is the one item_* code
	// answered 404 rather than 409: whether a map's event names it or an operator looks
	// it up (GET /admin/items/{id}), nothing by that id was found.
	EITEMNOTFOUND = "item_not_found"

	// EFORBIDDEN refuses a caller that is who it says but acts for someone else: a map
	// calling for another instance, or for a character whose lease it does not hold.
	EFORBIDDEN = "forbidden"
	// EEDGEUNAUTHORIZED refuses the credential presented on the routes the edge calls
	// (the route watch, the join and the character API on the control listener). It is
	// a code of its own, not EUNAUTHORIZED, because the edge forwards players' calls
	// there: their own refusals (a ticket, a key) must reach them unchanged, and only
	// this one is the edge's to handle.
	EEDGEUNAUTHORIZED = "edge_unauthorized"

	// ECHARACTERLIMIT refuses a new character to an identity that already has as many as
	// a host allows (ORCH_MAX_CHARACTERS_PER_KEY); deleting one makes room.
	ECHARACTERLIMIT = "character_limit"
	// ECHARACTERINPLAY refuses to delete a character while it is authoritative in a map
	// or travelling between two; it clears once the player has left.
	ECHARACTERINPLAY = "character_in_play"
	// ESTATEINCOMPATIBLE refuses to load a saved character state this orchestrator cannot
	// use as it is: a schema version newer than it knows or with no migration to its
	// own, or content that no longer matches the hash it was saved with. Nothing is
	// changed; the state stays stored for an orchestrator that can read it.
	ESTATEINCOMPATIBLE = "state_incompatible"
	// EIMAGENOTALLOWED refuses a map whose container image the host does not allow
	// (ORCH_MAP_IMAGES, plus ORCH_MAP_IMAGE): nothing is created or started.
	EIMAGENOTALLOWED = "image_not_allowed"
	// EMAPCONFIGREFUSED is a map's answer to a start-instance whose MapConfig its game
	// cannot run (its world or its game fails to build from it), with the game's own
	// reason; an admin create of such a map gets it back and nothing is kept.
	EMAPCONFIGREFUSED = "map_config_refused"
	// EIMAGEMISSING refuses an upgrade to an image the engine does not have: nothing
	// is started or changed.
	EIMAGEMISSING = "image_missing"
	// ESTORAGEFULL refuses durable work while the orchestrator's database cannot grow
	// (its disk is full): nothing of the request was written, everything acknowledged
	// before stays, and the same request works again once space returns. Callers that
	// retry (a map's pushes and critical events) retry it.
	ESTORAGEFULL = "storage_full"
)

// Error is mapyard's one application error. Code is machine-readable and stable;
// Message is for humans and never carries secrets or raw authKeys. Errors that are not
// *Error are internal by definition and are reported to callers only as EINTERNAL.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error implements the error interface.
func (e *Error) Error() string {
	return fmt.Sprintf("mapyard error: code=%s message=%s", e.Code, e.Message)
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code string, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Code returns the code of the first *Error in err's chain, EINTERNAL for any other
// error, and "" for nil.
func Code(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// Message returns the message of the first *Error in err's chain, or a generic
// message for internal errors so that their details (paths, SQL, secrets) never reach a
// client.
func Message(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// statuses maps error codes to HTTP statuses; codes not listed are 500.
var statuses = map[string]int{
	EBADREQUEST:       http.StatusBadRequest,
	EIMAGENOTALLOWED:  http.StatusBadRequest,
	EMAPCONFIGREFUSED: http.StatusBadRequest,
	EIMAGEMISSING:     http.StatusNotFound,
	EINVALIDENVELOPE:  http.StatusBadRequest,
	EHASHMISMATCH:     http.StatusBadRequest,
	ESCHEMAVERSION:    http.StatusBadRequest,
	EUNAUTHORIZED:     http.StatusUnauthorized,
	EFORBIDDEN:        http.StatusForbidden,
	ERATELIMITED:      http.StatusTooManyRequests,
	ECAPACITY:         http.StatusServiceUnavailable,
	ETICKETINVALID:    http.StatusUnauthorized,
	ETICKETEXPIRED:    http.StatusUnauthorized,
	ETICKETUSED:       http.StatusConflict,
	EWRONGMAP:         http.StatusConflict,
	ECONFLICT:         http.StatusConflict,
	ENOTFOUND:         http.StatusNotFound,
	EITEMNOTFOUND:     http.StatusNotFound,
	ETOOLARGE:         http.StatusRequestEntityTooLarge,
	EMAPQUARANTINED:   http.StatusServiceUnavailable,
	EMAPUNAVAILABLE:   http.StatusServiceUnavailable,
	EUNAVAILABLE:      http.StatusServiceUnavailable,
	ENOTIMPLEMENTED:   http.StatusNotImplemented,
	ESTORAGEFULL:      http.StatusInsufficientStorage,

	ECHARACTERLIMIT:    http.StatusConflict,
	ECHARACTERINPLAY:   http.StatusConflict,
	ESTATEINCOMPATIBLE: http.StatusConflict,

	EMETHODNOTALLOWED: http.StatusMethodNotAllowed,
	EUNSUPPORTEDMEDIA: http.StatusUnsupportedMediaType,

	EEDGEUNAUTHORIZED: http.StatusUnauthorized,
}

// Codes returns every code of the table above, sorted, so that tests can hold each
// one against what serves or forwards it.
func Codes() []string {
	out := make([]string, 0, len(statuses))
	for c := range statuses {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// ItemCodePrefix begins the codes of item rule refusals (mapserver/kernel/items: a pickup of
// an item someone else holds, a second unique item...). They are decided by those
// rules, listed there, and all answered 409 Conflict: final for that event, never worth
// a retry.
const ItemCodePrefix = "item_"

// Status returns the HTTP status an error code is answered with, so both sides of the
// control RPC and the public API agree on it (and a client can tell a retryable 5xx
// from a final 4xx).
func Status(code string) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	if strings.HasPrefix(code, ItemCodePrefix) {
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}
