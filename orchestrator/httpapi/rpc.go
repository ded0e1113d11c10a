package httpapi

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/apierr"
	"github.com/mapyard/mapyard/orchestrator/control"
)

// Admission is what the join API and the transfer routes need from the admission
// service.
type Admission interface {
	Join(ctx context.Context, r orchestrator.JoinRequest) (*orchestrator.JoinResponse, error)
	Redeem(ctx context.Context, r control.RedeemRequest) (*control.RedeemResult, error)
	RequestTransfer(ctx context.Context, r control.TransferRequest) (*control.TransferAnswer, error)
	TransferResult(ctx context.Context, r control.TransferResult) error
	Authorize(ctx context.Context, characterID, instanceID string, epoch int64) error
}

// Persistence is what the persist routes need from the store.
type Persistence interface {
	PutSnapshot(ctx context.Context, instanceID, partition string, revision int64, env control.SnapshotEnvelope) (bool, error)
	CommitCritical(ctx context.Context, ev control.CriticalEvent) (control.CriticalAck, error)
	CriticalEvent(ctx context.Context, eventID string) (*control.CriticalEvent, error)
}

// Body limits. A join is tiny; a snapshot partition may carry up to
// MaxSnapshotPayloadBytes of payload plus its envelope.
const (
	maxJoinBody     = 4 << 10
	maxSnapshotBody = control.MaxSnapshotPayloadBytes + 16<<10
	maxCriticalBody = control.MaxCriticalPayloadBytes + 16<<10
)

// rpc adapts a method that takes one JSON request and returns one JSON answer into an
// echo handler: strict decoding within limit, the call with the request's context, and
// errors left to the shared error handler.
func rpc[Req, Res any](limit int64, fn func(context.Context, Req) (Res, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		var r Req
		if err := control.DecodeJSON(c, &r, limit); err != nil {
			return err
		}
		res, err := fn(c.Request().Context(), r)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, res)
	}
}

// ok turns a method that answers only with an error into one with an {"ok": true} answer.
func ok[Req any](fn func(context.Context, Req) error) func(context.Context, Req) (map[string]bool, error) {
	return func(ctx context.Context, r Req) (map[string]bool, error) {
		if err := fn(ctx, r); err != nil {
			return nil, err
		}
		return map[string]bool{"ok": true}, nil
	}
}

// persistSnapshot ingests one snapshot partition. A character partition is only
// accepted from the map that holds the character's lease at the quoted epoch, so a map
// that lost the character cannot overwrite where it is now.
func (s *Server) persistSnapshot(ctx context.Context, r control.PersistSnapshot) (control.PersistSnapshotAnswer, error) {
	if id, ok := control.CharacterOfPartition(r.Partition); ok {
		if err := s.Admission.Authorize(ctx, id, r.InstanceID, r.Epoch); err != nil {
			return control.PersistSnapshotAnswer{}, err
		}
	}
	accepted, err := s.Store.PutSnapshot(ctx, r.InstanceID, r.Partition, r.Revision, r.Envelope)
	return control.PersistSnapshotAnswer{Accepted: accepted}, err
}

// persistCritical commits a critical event from a map and answers once it is durable.
// Item events are accepted only from the map that holds every character they touch at
// the epochs it quotes, so a map that lost a character cannot spend its items. Transfer
// boundaries are the orchestrator's own (written by request-transfer), never a map's.
// A retry of an event already committed is answered from the store before the lease
// check, so an ack lost on the way is never turned into a refusal.
func (s *Server) persistCritical(ctx context.Context, ev control.CriticalEvent) (control.CriticalAck, error) {
	if ev.Kind == control.EventTransferBoundary {
		return control.CriticalAck{}, apierr.Errorf(apierr.EBADREQUEST, "transfer boundaries are recorded through %s", control.PathRequestTransfer)
	}
	if _, err := s.Store.CriticalEvent(ctx, ev.EventID); err == nil {
		return s.Store.CommitCritical(ctx, ev)
	}
	chars, err := ev.Characters()
	if err != nil {
		return control.CriticalAck{}, err
	}
	for _, id := range chars {
		if err := s.Admission.Authorize(ctx, id, ev.InstanceID, ev.Epochs[id]); err != nil {
			return control.CriticalAck{}, err
		}
	}
	return s.Store.CommitCritical(ctx, ev)
}
