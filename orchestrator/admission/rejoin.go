package admission

import (
	"context"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/ticket"
)

// DefaultRejoinTTL is how long a rejoin credential works: as long as a guest's lease is
// kept (DefaultGuestLeaseTTL), so a page left open for hours still comes back after a
// map crash. Each use returns a fresh one.
const DefaultRejoinTTL = DefaultGuestLeaseTTL

// A map's resume token lives in that map's memory and dies with its process. The rejoin
// credential is the orchestrator's own way back for the same session: every join
// answer carries one (ticket.KindRejoin, signed with the ticket key, so it cannot be
// forged), and POST /api/v1/join {"rejoin"} trades it, once (its nonce is recorded like
// a ticket's), for a join ticket of the same character plus the next credential. It is
// honoured only while the character is still the session's: a guest's lease still names
// the credential's disposable subject (a guest that joined afresh, or was forgotten, is
// gone), a saved character is still owned by the credential's key hash.

// mintRejoin returns the rejoin credential of the session (characterID, subject).
func (s *Service) mintRejoin(characterID, subject string, now time.Time) (string, error) {
	ttl := s.RejoinTTL
	if ttl <= 0 {
		ttl = DefaultRejoinTTL
	}
	return s.Signer.Mint(ticket.Claims{
		Kind: ticket.KindRejoin, ID: ticket.NewID(12), Subject: subject, CharacterID: characterID,
		From: "-", To: "-", IssuedAtMs: now.UnixMilli(), ExpiresAtMs: now.Add(ttl).UnixMilli(), Nonce: ticket.NewID(16),
	})
}

// rejoin answers a join that presents a rejoin credential: a join ticket for the
// session's character into the map that holds its lease (waiting a bounded time for
// that map to be ready again, as after a crash), or the default map when that one
// cannot take it. Error codes: EBADREQUEST (the credential with other fields),
// ETICKETINVALID (forged, not a rejoin credential, or the session is over),
// ETICKETEXPIRED, ETICKETUSED, EMAPQUARANTINED, EMAPUNAVAILABLE.
func (s *Service) rejoin(ctx context.Context, r public.JoinRequest) (*public.JoinResponse, error) {
	if r.AuthKey != "" || r.CharacterID != "" || r.Name != "" {
		return nil, apierr.Errorf(apierr.EBADREQUEST, "a rejoin carries the rejoin credential alone")
	}
	c, err := s.Signer.Verify(r.Rejoin, s.Now())
	if err != nil {
		return nil, err
	}
	if c.Kind != ticket.KindRejoin {
		return nil, apierr.Errorf(apierr.ETICKETINVALID, "not a rejoin credential")
	}
	l, err := s.lease(ctx, c.CharacterID)
	if err != nil {
		return nil, err
	}
	if IsDisposable(c.CharacterID) {
		if l.Subject != c.Subject {
			return nil, apierr.Errorf(apierr.ETICKETINVALID, "the guest session is over; join again")
		}
	} else if _, err := s.Store.OwnedCharacter(ctx, c.Subject, c.CharacterID); apierr.Code(err) == apierr.ENOTFOUND {
		return nil, apierr.Errorf(apierr.ETICKETINVALID, "the character no longer exists")
	} else if err != nil {
		return nil, err
	}
	// The map first: a credential is used up only when a ticket comes of it, so a
	// rejoin that finds no map ready can be tried again.
	inst, err := s.rejoinTarget(ctx, l.InstanceID)
	if err != nil {
		return nil, err
	}
	if err := s.useNonce(ctx, c.Nonce, time.UnixMilli(c.ExpiresAtMs)); err != nil {
		return nil, err
	}
	res, err := s.ticket(c.CharacterID, c.Subject, inst)
	if err == nil {
		s.Log.Info("rejoin", "character", c.CharacterID, "instance", inst.ID)
	}
	return res, err
}

// rejoinTarget is the instance holding the lease, once it is ready (Acquire waits for a
// restarting map), else the default map.
func (s *Service) rejoinTarget(ctx context.Context, held string) (orchestrator.Instance, error) {
	if held != "" {
		if inst, err := s.Maps.Acquire(ctx, held); err == nil {
			return inst, nil
		}
	}
	return s.Maps.Acquire(ctx, s.DefaultInstanceID)
}

// KeepGuestState keeps the state a map pushed for a disposable character it holds (the
// caller checked the lease with Authorize): in memory only, never in the store, so that
// a rejoin after that map crashed starts from it. guest is false for a saved
// character, which the store keeps instead; kept is false for an older revision.
// Error codes: EINVALIDENVELOPE.
func (s *Service) KeepGuestState(characterID, instanceID string, revision int64, env record.SnapshotEnvelope) (guest, kept bool, err error) {
	if !IsDisposable(characterID) {
		return false, false, nil
	}
	kept, err = s.keepGuestState(characterID, instanceID, revision, env)
	return true, kept, err
}

// keepGuestState is KeepGuestState for a disposable character.
func (s *Service) keepGuestState(characterID, instanceID string, revision int64, env record.SnapshotEnvelope) (bool, error) {
	if err := env.ValidatePayload(record.MaxSnapshotPayloadBytes); err != nil {
		return false, err
	}
	p, err := record.DecodeCharacterStatePayload(env.Payload)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, held := s.guests[characterID]
	if !held || g.InstanceID != instanceID || (g.state != nil && g.state.Revision >= revision) {
		return false, nil
	}
	g.state = &record.CharacterState{CharacterID: characterID, MapID: p.MapID, InstanceID: p.InstanceID,
		X: p.X, Y: p.Y, Attributes: p.Attributes, Revision: revision, UpdatedAt: s.Now()}
	s.guests[characterID] = g
	return true, nil
}

// guestState is the state last pushed for a disposable character, if any.
func (s *Service) guestState(characterID string) *record.CharacterState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.guests[characterID].state; st != nil {
		cp := *st
		return &cp
	}
	return nil
}

// errRejoinAtMap refuses a rejoin credential presented to a map as a ticket.
var errRejoinAtMap = &apierr.Error{Code: apierr.ETICKETINVALID, Message: "a rejoin credential is not a ticket; trade it at POST /api/v1/join"}

// useNonce marks a rejoin credential's nonce used (spendNonce), durably on its own.
func (s *Service) useNonce(ctx context.Context, nonce string, expiresAt time.Time) error {
	return s.spendNonce(nonce, expiresAt, func() error { return s.Store.UseNonce(ctx, nonce, expiresAt) })
}
