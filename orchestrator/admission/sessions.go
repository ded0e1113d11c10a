package admission

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/orchestrator"
)

// Sessions lists every character that holds an authority lease, saved and disposable,
// newest lease first, with its state (see orchestrator.Session): what an operator sees
// at GET /admin/sessions.
func (s *Service) Sessions(ctx context.Context) ([]orchestrator.Session, error) {
	list, err := s.Store.HeldLeases(ctx)
	if err != nil {
		return nil, err
	}
	for i := range list {
		ss := &list[i]
		l := orchestrator.Lease{CharacterID: ss.CharacterID, InstanceID: ss.InstanceID, TransferID: ss.TransferID, Epoch: ss.Epoch,
			UpdatedAt: time.UnixMilli(ss.SinceMs)}
		state, seen, err := s.activity(ctx, l)
		if err != nil {
			return nil, err
		}
		ss.State = state
		if !seen.IsZero() {
			ss.LastSeenMs = seen.UnixMilli()
		}
	}

	s.mu.Lock()
	guests := make([]guestLease, 0, len(s.guests))
	for _, g := range s.guests {
		guests = append(guests, g)
	}
	s.mu.Unlock()
	for _, g := range guests {
		ss := orchestrator.Session{CharacterID: g.CharacterID, Identity: "guest", Disposable: true, InstanceID: g.InstanceID,
			TransferID: g.TransferID, Epoch: g.Epoch, SinceMs: g.at.UnixMilli(), State: orchestrator.SessionGuest}
		if g.TransferID != "" {
			ss.State = orchestrator.SessionInTransit
		}
		if tr, err := s.Store.LastTransfer(ctx, g.CharacterID); err == nil {
			ss.LastTransfer = tr.Summary()
		} else if apierr.Code(err) != apierr.ENOTFOUND {
			return nil, err
		}
		list = append(list, ss)
	}
	slices.SortStableFunc(list, func(a, b orchestrator.Session) int { return cmp.Compare(b.SinceMs, a.SinceMs) })
	return list, nil
}

// Cleanup removes what has outlived its use: nonces of expired tokens (from the
// database and from memory), finished transfers whose tokens expired, and guest leases
// not renewed within GuestLeaseTTL. The sweeper and the checkpoint timer do the same on
// their own cadence; POST /admin/cleanup lets an operator do it now and see the counts.
func (s *Service) Cleanup(ctx context.Context) (orchestrator.CleanupResult, error) {
	now := s.Now()
	var res orchestrator.CleanupResult
	var err error
	s.forgetExpiredNonces(now)
	if res.Nonces, err = s.Store.PruneNonces(ctx); err != nil {
		return res, err
	}
	if res.Transfers, err = s.Store.PruneFinishedTransfers(ctx, now); err != nil {
		return res, err
	}
	res.GuestLeases = s.forgetIdleGuests(now)
	s.Log.Info("cleanup", "nonces", res.Nonces, "transfers", res.Transfers, "guestLeases", res.GuestLeases)
	return res, nil
}
