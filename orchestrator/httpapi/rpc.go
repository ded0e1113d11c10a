package httpapi

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/critical"
)

// Admission is what the join API and the transfer routes need from the admission
// service.
type Admission interface {
	Join(ctx context.Context, r public.JoinRequest) (*public.JoinResponse, error)
	Redeem(ctx context.Context, r mapcontract.RedeemRequest) (*mapcontract.RedeemResult, error)
	RequestTransfer(ctx context.Context, r mapcontract.TransferRequest) (*mapcontract.TransferAnswer, error)
	TransferResult(ctx context.Context, r mapcontract.TransferResult) error
	Authorize(ctx context.Context, characterID, instanceID string, epoch int64) error
	Lease(ctx context.Context, characterID string) (orchestrator.Lease, error)
	// KeepGuestState keeps a disposable character's pushed state in memory (guest
	// false: a saved character, for the store).
	KeepGuestState(characterID, instanceID string, revision int64, env record.SnapshotEnvelope) (guest, kept bool, err error)
}

// Persistence is what the persist and item routes need from the store: snapshot
// ingest here, and what the critical-event service works on.
type Persistence interface {
	PutSnapshot(ctx context.Context, instanceID, partition string, revision int64, env record.SnapshotEnvelope) (bool, error)
	critical.Store
}

// Body limits. A player's call (a join, the character API) has the limit the edge
// applies too; a snapshot partition may carry up to MaxSnapshotPayloadBytes of payload
// plus its envelope.
const (
	maxJoinBody     = public.MaxPlayerBody
	maxSnapshotBody = record.MaxSnapshotPayloadBytes + 16<<10
	maxCriticalBody = record.MaxCriticalPayloadBytes + 16<<10
)

// rpc adapts a method that takes one JSON request and returns one JSON answer into an
// echo handler: strict decoding within limit, the call with the request's context, and
// errors left to the shared error handler.
func rpc[Req, Res any](limit int64, fn func(context.Context, Req) (Res, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		var r Req
		if err := httpkit.DecodeJSON(c, &r, limit); err != nil {
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
func (s *Server) persistSnapshot(ctx context.Context, r mapcontract.PersistSnapshot) (mapcontract.PersistSnapshotAnswer, error) {
	if id, ok := record.CharacterOfPartition(r.Partition); ok {
		if err := s.Admission.Authorize(ctx, id, r.InstanceID, r.Epoch); err != nil {
			return mapcontract.PersistSnapshotAnswer{}, err
		}
		// A guest's state never reaches the store; the orchestrator keeps the newest in
		// memory for a rejoin after a map crash.
		if guest, kept, err := s.Admission.KeepGuestState(id, r.InstanceID, r.Revision, r.Envelope); guest {
			return mapcontract.PersistSnapshotAnswer{Accepted: kept}, err
		}
	}
	accepted, err := s.Store.PutSnapshot(ctx, r.InstanceID, r.Partition, r.Revision, r.Envelope)
	return mapcontract.PersistSnapshotAnswer{Accepted: accepted}, err
}
