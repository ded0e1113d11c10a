// Package wire is the map server's game protocol as bytes: the binary snapshot
// encoding (full and delta frames against a baseline the client acknowledged), the
// strict decoder of movement input batches, and the game's error codes. docs/netcode.md
// documents the snapshot layout byte by byte.
//
// The package builds for GOOS=js GOARCH=wasm and imports nothing beyond the standard
// library and the pure simulation, so the Go client, the bots and the browser decode
// with the very code the server encodes with.
package wire

import "fmt"

// Public error codes of the game protocol, sent in `error` envelopes. Clients switch on
// Code; Message is for humans.
const (
	// CodeBadRequest: the envelope itself is malformed (not JSON, wrong version, unknown
	// kind, or a first message that is not a hello).
	CodeBadRequest = "bad_request"
	// CodeUnknownCommand: a command names a feature/action the map does not serve.
	CodeUnknownCommand = "unknown_command"
	// CodeBadPayload: a command's payload does not have the documented shape.
	CodeBadPayload = "bad_payload"
	// CodeTooManyInputs: an input batch holds more than MaxInputsPerBatch entries.
	CodeTooManyInputs = "too_many_inputs"
	// CodeBadSeq: an input seq is zero or not strictly increasing within its batch.
	CodeBadSeq = "bad_seq"
	// CodeBadDirection: an input direction component lies outside [-127, 127].
	CodeBadDirection = "bad_direction"
	// CodeNotImplemented: the command is known but not served yet.
	CodeNotImplemented = "not_implemented"
	// CodeMapUnavailable: the map cannot take the player now (try again later).
	CodeMapUnavailable = "map_unavailable"
	// CodeMapQuarantined: the map is quarantined by the orchestrator.
	CodeMapQuarantined = "map_quarantined"
	// CodeUnsupportedFormat: the hello's "formats" does not include the snapshot format
	// the map sends (FormatVersion); the connection closes with 1008 right after.
	CodeUnsupportedFormat = "unsupported_format"
	// CodeReplaced: a newer join took the character over (a second tab, a reload); the
	// connection closes with 4000 right after.
	CodeReplaced = "replaced"
	// CodeGuestNoItems: a guest (a disposable character, joined without a key) cannot
	// hold items, which the orchestrator keeps for saved characters only: its pickup,
	// or an accepted trade that would give it an item, is refused by the map before
	// anything is sent, and nothing changes hands.
	CodeGuestNoItems = "guest_no_items"
	// CodeRateLimited: a message over the connection's limits (messages or bytes per
	// second) was not processed; a client that goes on is closed with 1008.
	CodeRateLimited = "rate_limited"
)

// Error is a protocol error with a public code, answered to the client in an `error`
// envelope while the connection stays open.
type Error struct {
	Code    string
	Message string
}

// Error formats the code and message.
func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// errorf builds an *Error with a formatted message.
func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
