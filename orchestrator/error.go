package orchestrator

import (
	"errors"
	"fmt"
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
	// EFORBIDDEN refuses a caller that is who it says but acts for someone else: a map
	// calling for another instance, or for a character whose lease it does not hold.
	EFORBIDDEN = "forbidden"
	// ERATELIMITED refuses a client address over its request rate; Retry-After says when
	// to come back.
	ERATELIMITED = "rate_limited"
	// ECAPACITY refuses what would grow state held in memory past its configured bound
	// (for example disposable guest characters); it clears as players leave.
	ECAPACITY = "capacity"
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

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for any other
// error, and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the message of the first *Error in err's chain, or a generic
// message for internal errors so that their details (paths, SQL, secrets) never reach a
// client.
func ErrorMessage(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
