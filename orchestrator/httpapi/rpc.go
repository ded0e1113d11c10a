package httpapi

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/control"
)

// Admission is what the join API and the transfer routes need from the admission
// service.
type Admission interface {
	Join(ctx context.Context, r orchestrator.JoinRequest) (*orchestrator.JoinResponse, error)
	Redeem(ctx context.Context, r orchestrator.RedeemRequest) (*orchestrator.RedeemResult, error)
	RequestTransfer(ctx context.Context, r orchestrator.TransferRequest) (*orchestrator.TransferAnswer, error)
	TransferResult(ctx context.Context, r orchestrator.TransferResult) error
	Authorize(ctx context.Context, characterID, instanceID string, epoch int64) error
}

// Persistence is what the persist routes need from the store.
type Persistence interface {
	PutSnapshot(ctx context.Context, instanceID, partition string, revision int64, env orchestrator.SnapshotEnvelope) (bool, error)
	CommitCritical(ctx context.Context, ev orchestrator.CriticalEvent) (orchestrator.CriticalAck, error)
}

// Body limits. A join is tiny; a snapshot partition may carry up to
// MaxSnapshotPayloadBytes of payload plus its envelope.
const (
	maxJoinBody     = 4 << 10
	maxSnapshotBody = orchestrator.MaxSnapshotPayloadBytes + 16<<10
	maxCriticalBody = orchestrator.MaxCriticalPayloadBytes + 16<<10
)

func (s *Server) handleJoin(c echo.Context) error {
	var r orchestrator.JoinRequest
	if err := control.DecodeJSON(c, &r, maxJoinBody); err != nil {
		return err
	}
	res, err := s.Admission.Join(c.Request().Context(), r)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

func (s *Server) handleRedeem(c echo.Context) error {
	var r orchestrator.RedeemRequest
	if err := control.DecodeJSON(c, &r, control.DefaultMaxBodySize); err != nil {
		return err
	}
	res, err := s.Admission.Redeem(c.Request().Context(), r)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

func (s *Server) handleRequestTransfer(c echo.Context) error {
	var r orchestrator.TransferRequest
	if err := control.DecodeJSON(c, &r, control.DefaultMaxBodySize); err != nil {
		return err
	}
	res, err := s.Admission.RequestTransfer(c.Request().Context(), r)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

func (s *Server) handleTransferResult(c echo.Context) error {
	var r orchestrator.TransferResult
	if err := control.DecodeJSON(c, &r, control.DefaultMaxBodySize); err != nil {
		return err
	}
	if err := s.Admission.TransferResult(c.Request().Context(), r); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]bool{"ok": true})
}

// handlePersistSnapshot ingests one snapshot partition. A character partition is only
// accepted from the map that holds the character's lease at the quoted epoch, so a map
// that lost the character cannot overwrite where it is now.
func (s *Server) handlePersistSnapshot(c echo.Context) error {
	var r control.PersistSnapshot
	if err := control.DecodeJSON(c, &r, maxSnapshotBody); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if id, ok := orchestrator.CharacterOfPartition(r.Partition); ok {
		if err := s.Admission.Authorize(ctx, id, r.InstanceID, r.Epoch); err != nil {
			return err
		}
	}
	accepted, err := s.Store.PutSnapshot(ctx, r.InstanceID, r.Partition, r.Revision, r.Envelope)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, control.PersistSnapshotAnswer{Accepted: accepted})
}

// handlePersistCritical answers only once the event is durable.
func (s *Server) handlePersistCritical(c echo.Context) error {
	var ev orchestrator.CriticalEvent
	if err := control.DecodeJSON(c, &ev, maxCriticalBody); err != nil {
		return err
	}
	ack, err := s.Store.CommitCritical(c.Request().Context(), ev)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ack)
}
