package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/ticket"
)

// pendingStates are the states a transfer can be aborted from.
var pendingStates = orchestrator.PendingTransferStates()

// RequestTransfer moves a character out of its source map. One transaction records the
// transfer at token_issued, the character's final state as a critical event and the end
// of the source's lease (the character is in transit, authoritative nowhere); then the
// token is minted from the recorded transfer. A retry with the same TransferID returns
// the same token. The destination is started if needed; if it cannot
// take players the request fails and the character stays where it is.
//
// Error codes: EBADREQUEST, EFORBIDDEN (the source does not hold the character),
// ECONFLICT (it holds it at another epoch, or the id was used for another transfer),
// EMAPQUARANTINED, EMAPUNAVAILABLE.
func (s *Service) RequestTransfer(ctx context.Context, r mapcontract.TransferRequest) (ans *mapcontract.TransferAnswer, err error) {
	defer func(start time.Time) { s.Metrics.requested(start, err) }(time.Now())
	return s.requestTransfer(ctx, r)
}

// requestTransfer is RequestTransfer without its metrics.
func (s *Service) requestTransfer(ctx context.Context, r mapcontract.TransferRequest) (*mapcontract.TransferAnswer, error) {
	toMapID := r.ToMapID
	if r.Handoff && r.ToInstanceID == "" && r.ToMapID == "" {
		r.ToInstanceID = r.FromInstanceID
	}
	if r.ToInstanceID == "" && r.ToMapID != "" {
		r.ToInstanceID = s.instanceOfMap(r.ToMapID)
	}
	for _, f := range []struct{ name, v string }{{"transferId", r.TransferID}, {"characterId", r.CharacterID}} {
		if !record.ValidKey(f.v) {
			return nil, apierr.Errorf(apierr.EBADREQUEST, "%s must be 1 to %d printable characters without spaces", f.name, record.MaxKeyLen)
		}
	}
	for _, f := range []struct{ name, v string }{{"fromInstanceId", r.FromInstanceID}, {"toInstanceId", r.ToInstanceID}} {
		if !record.ValidName(f.v) {
			return nil, apierr.Errorf(apierr.EBADREQUEST, "%s must be %s", f.name, record.IDRule)
		}
	}
	switch {
	case r.Handoff && r.ToInstanceID != r.FromInstanceID:
		return nil, apierr.Errorf(apierr.EBADREQUEST, "a handoff goes to the next container of the same instance: toInstanceId must be fromInstanceId")
	case r.Handoff && !s.Maps.HandingOff(r.FromInstanceID):
		return nil, apierr.Errorf(apierr.ECONFLICT, "map instance %q is not handing its players over to a next container", r.FromInstanceID)
	case !r.Handoff && r.FromInstanceID == r.ToInstanceID:
		return nil, apierr.Errorf(apierr.EBADREQUEST, "a transfer must change map instance")
	}

	if r.Handoff && IsDisposable(r.CharacterID) {
		s.reclaimGuest(r.CharacterID, r.FromInstanceID, r.Epoch)
	}

	// The destination may take seconds to start: wait for it before taking the
	// character's lock (which other characters share a stripe of), after a cheap check
	// that the request could succeed at all; everything is checked again under the lock.
	if _, err := s.Store.Transfer(ctx, r.TransferID); apierr.Code(err) == apierr.ENOTFOUND {
		if err := s.Authorize(ctx, r.CharacterID, r.FromInstanceID, r.Epoch); err != nil {
			return nil, err
		}
		if _, err := s.destination(ctx, r.FromInstanceID, r.ToInstanceID, toMapID); err != nil {
			return nil, err
		}
	}

	unlock := s.lock(r.CharacterID)
	defer unlock()

	if tr, err := s.Store.Transfer(ctx, r.TransferID); err == nil {
		return s.retry(tr, r)
	} else if apierr.Code(err) != apierr.ENOTFOUND {
		return nil, err
	}

	lease, err := s.lease(ctx, r.CharacterID)
	if err != nil {
		return nil, err
	}
	if err := holds(lease, r.CharacterID, r.FromInstanceID, r.Epoch); err != nil {
		return nil, err
	}

	now := s.Now()
	tr := &orchestrator.Transfer{
		ID: r.TransferID, CharacterID: r.CharacterID, Subject: lease.Subject,
		FromInstanceID: r.FromInstanceID, ToInstanceID: r.ToInstanceID, State: orchestrator.TransferTokenIssued,
		Nonce: ticket.NewID(16), IssuedAt: now, ExpiresAt: now.Add(s.TransferTTL),
	}
	transit := orchestrator.Lease{CharacterID: r.CharacterID, Subject: lease.Subject, Epoch: lease.Epoch + 1, TransferID: tr.ID}
	if err := s.issue(ctx, tr, r.State, transit, lease.Epoch); err != nil {
		return nil, fmt.Errorf("request transfer: %w", err)
	}
	s.Log.Info("transfer token issued", "transfer", tr.ID, "character", tr.CharacterID, "from", tr.FromInstanceID, "to", tr.ToInstanceID)
	return s.answer(tr)
}

// reclaimGuest takes back, for a live upgrade's handoff, the lease of a guest that
// this orchestrator does not know: guests' leases live in memory, so an orchestrator
// restarted before a map's upgrade has forgotten the guests playing on it. The one map
// that can still simulate such a guest is the one asking, at the epoch it holds, so
// its claim is taken as the lease; a lease the orchestrator knows is never replaced.
func (s *Service) reclaimGuest(characterID, instanceID string, epoch int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.guests[characterID]; known || s.guestsFullLocked() || epoch <= 0 {
		return
	}
	now := s.Now()
	// Its subject was forgotten with it: a fresh one, as a guest's join mints.
	l := orchestrator.Lease{CharacterID: characterID, Subject: disposablePrefix + ticket.NewID(12), InstanceID: instanceID, Epoch: epoch, UpdatedAt: now}
	s.guests[characterID] = guestLease{Lease: l, at: now}
	s.Log.Info("guest lease taken back for a handoff", "character", characterID, "instance", instanceID, "epoch", epoch)
}

// destination returns the ready destination instance. A portal that names a map whose
// instance does not exist yet creates it (lazy spawn): from the map's pre-authored
// template, or, for a derived ("wild-") map, from its parent's config through
// mapgen.Derive. Anything else unknown is map_unavailable. The new instance runs the
// image its template names (a derived map its parent's), whatever image the source
// runs: the character travels through the orchestrator, not between two games. A
// template naming an image the host does not allow is image_not_allowed, and nothing
// is started.
func (s *Service) destination(ctx context.Context, fromInstanceID, instanceID, mapID string) (orchestrator.Instance, error) {
	inst, err := s.Maps.Acquire(ctx, instanceID)
	if apierr.Code(err) != apierr.ENOTFOUND {
		return inst, err
	}
	if mapID == "" || instanceID != s.instanceOfMap(mapID) {
		return inst, apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q does not exist", instanceID)
	}
	var config json.RawMessage
	var image string
	if IsDerived(mapID) {
		c, err := s.deriveConfig(ctx, fromInstanceID, mapID)
		if err != nil {
			return inst, err
		}
		if config, image, err = splitImage(c); err != nil {
			return inst, err
		}
	} else if t, err := s.Templates.Template(mapID); err != nil {
		return inst, apierr.Errorf(apierr.EMAPUNAVAILABLE, "map %q has no template to start an instance from", mapID)
	} else {
		image = t.Image
	}
	if _, err := s.Maps.Create(ctx, orchestrator.CreateInstance{InstanceID: instanceID, MapID: mapID, Config: config, Image: image}); err != nil && apierr.Code(err) != apierr.ECONFLICT {
		return inst, err
	}
	s.Log.Info("map instance created for a transfer", "instance", instanceID, "map", mapID, "derived", config != nil, "image", image)
	return s.Maps.Acquire(ctx, instanceID)
}

// instanceOfMap is the instance a portal naming only mapID leads to: the deployment's
// default instance for its default map (which need not be called "<mapId>-1"), else
// mapgen.InstanceOfMap's one instance of the map.
func (s *Service) instanceOfMap(mapID string) string {
	if mapID == s.DefaultMapID && s.DefaultInstanceID != "" {
		return s.DefaultInstanceID
	}
	return mapgen.InstanceOfMap(mapID)
}

// retry answers a repeated request: the same token while it is valid.
func (s *Service) retry(tr *orchestrator.Transfer, r mapcontract.TransferRequest) (*mapcontract.TransferAnswer, error) {
	if tr.CharacterID != r.CharacterID || tr.FromInstanceID != r.FromInstanceID || tr.ToInstanceID != r.ToInstanceID {
		return nil, apierr.Errorf(apierr.ECONFLICT, "transfer id %q was used for another transfer", tr.ID)
	}
	switch tr.State {
	case orchestrator.TransferTokenIssued:
		return s.answer(tr)
	case orchestrator.TransferAborted:
		return nil, apierr.Errorf(apierr.ECONFLICT, "transfer %q was aborted: %s", tr.ID, tr.Reason)
	default:
		return nil, apierr.Errorf(apierr.ECONFLICT, "transfer %q is %s", tr.ID, tr.State)
	}
}

func (s *Service) answer(tr *orchestrator.Transfer) (*mapcontract.TransferAnswer, error) {
	tok, err := s.Signer.Mint(ticket.Claims{
		Kind: ticket.KindTransfer, ID: tr.ID, Subject: tr.Subject, CharacterID: tr.CharacterID,
		From: tr.FromInstanceID, To: tr.ToInstanceID, IssuedAtMs: tr.IssuedAt.UnixMilli(),
		ExpiresAtMs: tr.ExpiresAt.UnixMilli(), Nonce: tr.Nonce,
	})
	if err != nil {
		return nil, err
	}
	return &mapcontract.TransferAnswer{
		TransferID: tr.ID, Token: tok, ToInstanceID: tr.ToInstanceID,
		WS: public.WSPath(tr.ToInstanceID), ExpiresAtMs: tr.ExpiresAt.UnixMilli(),
	}, nil
}

// issue records a transfer at token_issued with the character's final state in the
// source and its lease in transit (the source gives the character up with it). The
// state must pass record.CharacterState.Validate (EBADREQUEST), whoever keeps it. For a
// saved character all three are one transaction, the final state a transfer_boundary
// critical event (orchestrator.BoundaryCommit); a disposable character's state and
// lease live in memory, beside its transfer row. Nothing is recorded when it fails.
func (s *Service) issue(ctx context.Context, tr *orchestrator.Transfer, st record.CharacterState, transit orchestrator.Lease, prevEpoch int64) error {
	st.CharacterID, st.InstanceID = tr.CharacterID, tr.FromInstanceID
	if st.Revision <= 0 {
		st.Revision = prevEpoch
	}
	if err := st.Validate(); err != nil {
		return err
	}
	if IsDisposable(tr.CharacterID) {
		if err := s.Store.CreateTransfer(ctx, tr); err != nil {
			return err
		}
		if err := s.setLease(ctx, transit, prevEpoch); err != nil {
			s.abort(ctx, tr.ID, "lease changed")
			return fmt.Errorf("lease: %w", err)
		}
		s.mu.Lock()
		s.handovers[tr.ID] = &st
		s.mu.Unlock()
		return nil
	}
	boundary, err := orchestrator.BoundaryCommit(transferEventPrefix+tr.ID, st)
	if err != nil {
		return fmt.Errorf("final state: %w", err)
	}
	return s.Store.IssueTransfer(ctx, orchestrator.TransferIssue{Transfer: tr, Boundary: boundary, Lease: transit, PrevEpoch: prevEpoch})
}

// TransferResult records the destination's report. Success completes the transfer;
// failure aborts it and frees the character, whose player re-joins: Join then sends it
// back to the source map if that is healthy, else to the default map.
//
// Error codes: EBADREQUEST, ENOTFOUND, ECONFLICT (not the destination, or the transfer
// is not at that step).
func (s *Service) TransferResult(ctx context.Context, r mapcontract.TransferResult) error {
	tr, err := s.Store.Transfer(ctx, r.TransferID)
	if err != nil {
		return err
	}
	if tr.ToInstanceID != r.InstanceID {
		return apierr.Errorf(apierr.ECONFLICT, "only the destination reports a transfer's result")
	}
	unlock := s.lock(tr.CharacterID)
	defer unlock()
	if !r.Success {
		return s.abortAndFree(ctx, tr, outcomeDestinationFailed, "destination failed: "+r.Reason)
	}
	if tr.State == orchestrator.TransferCompleted {
		return nil // a retried report
	}
	if _, err := s.Store.AdvanceTransfer(ctx, tr.ID, []orchestrator.TransferState{orchestrator.TransferDestinationAccepted}, orchestrator.TransferCompleted, ""); err != nil {
		return err
	}
	s.Metrics.ended(outcomeCompleted, tr.IssuedAt, s.Now())
	s.Log.Info("transfer completed", "transfer", tr.ID, "character", tr.CharacterID, "to", tr.ToInstanceID)
	return nil
}

// abortAndFree aborts a transfer, counted as ending with end, and, if the character's lease
// is still the transfer's or the failed destination's, frees it so the player's next
// join can take it.
func (s *Service) abortAndFree(ctx context.Context, tr *orchestrator.Transfer, end, reason string) error {
	if _, err := s.Store.AdvanceTransfer(ctx, tr.ID, pendingStates, orchestrator.TransferAborted, reason); err != nil {
		return err
	}
	s.Metrics.ended(end, tr.IssuedAt, s.Now())
	l, err := s.lease(ctx, tr.CharacterID)
	if err != nil {
		return err
	}
	if l.TransferID == tr.ID || l.InstanceID == tr.ToInstanceID {
		free := orchestrator.Lease{CharacterID: tr.CharacterID, Subject: l.Subject, Epoch: l.Epoch + 1}
		if err := s.setLease(ctx, free, l.Epoch); err != nil {
			return err
		}
	}
	s.mu.Lock()
	delete(s.handovers, tr.ID)
	s.mu.Unlock()
	s.Log.Info("transfer aborted", "transfer", tr.ID, "character", tr.CharacterID, "reason", reason)
	return nil
}

// abort marks a transfer aborted after a failure in RequestTransfer, logging (not
// returning) a failure to do so: the request already fails with the original error.
func (s *Service) abort(ctx context.Context, id, reason string) {
	if _, err := s.Store.AdvanceTransfer(ctx, id, pendingStates, orchestrator.TransferAborted, reason); err != nil {
		s.Log.Error("abort transfer", "transfer", id, "err", err)
	} else {
		s.Metrics.ended(outcomeFailed, time.Time{}, time.Time{})
	}
}

// Sweep aborts transfers whose token expired before the destination redeemed it, and
// transfers accepted but never reported within grace after expiry. It runs on a timer
// and after a restart, so no transfer stays pending forever.
func (s *Service) Sweep(ctx context.Context, grace time.Duration) (aborted int, err error) {
	now := s.Now()
	s.forgetExpiredNonces(now)
	s.forgetIdleGuests(now)
	pending, err := s.Store.PendingTransfers(ctx)
	if err != nil {
		return 0, err
	}
	for _, tr := range pending {
		deadline := tr.ExpiresAt
		if tr.State == orchestrator.TransferDestinationAccepted {
			deadline = deadline.Add(grace)
		}
		if now.Before(deadline) {
			continue
		}
		unlock := s.lock(tr.CharacterID)
		if tr.State == orchestrator.TransferDestinationAccepted {
			// The destination admitted the player but never reported: it holds the
			// lease, so the transfer happened; record it as completed.
			if _, err = s.Store.AdvanceTransfer(ctx, tr.ID, []orchestrator.TransferState{tr.State}, orchestrator.TransferCompleted, "no report from destination"); err == nil {
				s.Metrics.ended(outcomeCompleted, time.Time{}, time.Time{}) // no report: no handoff time
			}
		} else {
			err = s.abortAndFree(ctx, tr, outcomeExpired, "token expired")
			aborted++
		}
		unlock()
		if err != nil && apierr.Code(err) != apierr.ECONFLICT {
			return aborted, err
		}
	}
	return aborted, nil
}
