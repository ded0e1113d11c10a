package admission

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/ticket"
)

// Redeem admits the holder of a join ticket or transfer token into the map that
// presents it. It verifies the signature and expiry, that the token names this map, that
// the map may take players, then durably marks the nonce used, so a token works once
// even across orchestrator restarts, and moves the character's lease to the map with a
// new epoch. A second login takes a character over from the map that held it; that map
// learns it on its next write (Authorize fails).
//
// Error codes: EBADREQUEST, ETICKETINVALID, ETICKETEXPIRED, ETICKETUSED, EWRONGMAP,
// ECAPACITY (a new guest past MaxGuests), EMAPQUARANTINED, EMAPUNAVAILABLE.
func (s *Service) Redeem(ctx context.Context, r mapcontract.RedeemRequest) (res *mapcontract.RedeemResult, err error) {
	defer func(start time.Time) { s.Metrics.redeemed(s.redeemKind(r.Token, res), start, err) }(time.Now())
	return s.redeem(ctx, r)
}

// redeemKind is the kind a redeem is counted under: the result's, else the kind of a
// token whose signature verifies (an expired one too); "" for a token that does not.
func (s *Service) redeemKind(token string, res *mapcontract.RedeemResult) string {
	if res != nil {
		return res.Kind
	}
	if c, err := s.Signer.Verify(token, s.Now()); err == nil || apierr.Code(err) == apierr.ETICKETEXPIRED {
		if c.Kind == ticket.KindTransfer {
			return "transfer"
		}
		return "join"
	}
	return ""
}

// redeem is Redeem without its metrics.
func (s *Service) redeem(ctx context.Context, r mapcontract.RedeemRequest) (*mapcontract.RedeemResult, error) {
	if !record.ValidName(r.InstanceID) {
		return nil, apierr.Errorf(apierr.EBADREQUEST, "instanceId must be a valid id")
	}
	c, err := s.Signer.Verify(r.Token, s.Now())
	if err != nil {
		return nil, err
	}
	if c.Kind == ticket.KindRejoin {
		return nil, errRejoinAtMap
	}
	if c.To != r.InstanceID {
		return nil, apierr.Errorf(apierr.EWRONGMAP, "ticket is for map instance %q, not %q", c.To, r.InstanceID)
	}
	if _, err := s.Maps.Gate(r.InstanceID); err != nil {
		return nil, err
	}

	unlock := s.lock(c.CharacterID)
	defer unlock()

	var tr *orchestrator.Transfer
	if c.Kind == ticket.KindTransfer {
		if tr, err = s.Store.Transfer(ctx, c.ID); err != nil {
			if apierr.Code(err) == apierr.ENOTFOUND {
				return nil, apierr.Errorf(apierr.ETICKETINVALID, "transfer %q is not known", c.ID)
			}
			return nil, err
		}
		switch tr.State {
		case orchestrator.TransferTokenIssued:
		case orchestrator.TransferAborted:
			return nil, apierr.Errorf(apierr.ETICKETEXPIRED, "transfer was aborted: %s", tr.Reason)
		default:
			return nil, apierr.Errorf(apierr.ETICKETUSED, "transfer token already used")
		}
	}
	// A guest that would not fit is refused before its ticket is used up, so it can
	// come back later with the same ticket while that is still valid.
	if s.guestWontFit(c.CharacterID) {
		return nil, errGuestsFull
	}
	epoch, err := s.admit(ctx, c, r.InstanceID, tr)
	if err != nil {
		return nil, err
	}

	res := &mapcontract.RedeemResult{
		Kind: "join", CharacterID: c.CharacterID, Name: s.nameOf(ctx, c), Disposable: IsDisposable(c.CharacterID), Epoch: epoch,
	}
	if tr != nil {
		res.Kind, res.TransferID, res.FromID = "transfer", tr.ID, tr.FromInstanceID
	}
	if res.State, err = s.state(ctx, c.CharacterID, c.ID); err != nil {
		return nil, err
	}
	if res.Items, err = s.heldItems(ctx, c.CharacterID); err != nil {
		return nil, err
	}
	s.Log.Info("ticket redeemed", "kind", res.Kind, "id", c.ID, "character", c.CharacterID, "instance", r.InstanceID, "epoch", epoch)
	return res, nil
}

// admit uses the ticket's nonce and moves the character's lease to instanceID with the
// next epoch, in one durable transaction with the transfer it accepts (tr) or the one a
// join supersedes, and returns the new epoch. The nonce is spent as every credential's
// is (spendNonce). The caller holds the character's lock.
func (s *Service) admit(ctx context.Context, c ticket.Claims, instanceID string, tr *orchestrator.Transfer) (epoch int64, err error) {
	expiresAt := time.UnixMilli(c.ExpiresAtMs)
	err = s.spendNonce(c.Nonce, expiresAt, func() error {
		epoch, err = s.admitOnce(ctx, c, instanceID, tr, expiresAt)
		return err
	})
	return epoch, err
}

// spendNonce is the one rule by which a credential's nonce is used, whatever the
// credential (a join ticket, a transfer token, a rejoin credential): the in-memory set
// answers a replay this process has seen without a durable write, so a flood of
// replays does not cost an fsync each; then write records the nonce in the store, the
// authority across restarts, with whatever else the credential does in the same
// transaction. A write that fails for any other reason than the nonce being used
// (ETICKETUSED) wrote nothing, so the nonce is forgotten in memory too and a retry is
// answered by the store.
func (s *Service) spendNonce(nonce string, expiresAt time.Time, write func() error) error {
	if _, seen := s.used.LoadOrStore(nonce, expiresAt); seen {
		return apierr.Errorf(apierr.ETICKETUSED, "ticket already used")
	}
	err := write()
	if err != nil && apierr.Code(err) != apierr.ETICKETUSED {
		s.used.Delete(nonce)
	}
	return err
}

// admitOnce is admit after the in-memory replay check.
func (s *Service) admitOnce(ctx context.Context, c ticket.Claims, instanceID string, tr *orchestrator.Transfer, expiresAt time.Time) (int64, error) {
	prev, err := s.lease(ctx, c.CharacterID)
	if err != nil {
		return 0, err
	}
	next := orchestrator.Lease{CharacterID: c.CharacterID, Subject: c.Subject, InstanceID: instanceID, Epoch: prev.Epoch + 1}
	a := orchestrator.Admission{Nonce: c.Nonce, ExpiresAt: expiresAt, PrevEpoch: prev.Epoch}
	if !IsDisposable(c.CharacterID) {
		a.Lease = next
		if c.Kind == ticket.KindJoin {
			// A join ticket of a character deleted since it was issued admits no one.
			// (A character in play or in transit cannot be deleted, so transfer
			// tokens need no check.)
			a.Owner = c.Subject
		}
	}
	if tr != nil {
		a.Accept = tr.ID
	} else if prev.TransferID != "" {
		// A join while a transfer is in flight (say, the player reloaded the page):
		// the join wins and the transfer's token stops working.
		a.Supersede = prev.TransferID
	}
	superseded, err := s.Store.Admit(ctx, a)
	if a.Owner != "" && apierr.Code(err) == apierr.ENOTFOUND {
		return 0, apierr.Errorf(apierr.ETICKETINVALID, "the ticket's character no longer exists")
	}
	if err != nil {
		return 0, fmt.Errorf("redeem: %w", err)
	}
	if superseded {
		s.Metrics.ended(outcomeSuperseded, time.Time{}, time.Time{})
	}
	if IsDisposable(c.CharacterID) {
		if err := s.setLease(ctx, next, prev.Epoch); err != nil {
			return 0, fmt.Errorf("redeem: lease: %w", err)
		}
	}
	return next.Epoch, nil
}

// forgetExpiredNonces drops nonces of expired tokens from memory: an expired token is
// refused before its nonce is looked at.
func (s *Service) forgetExpiredNonces(now time.Time) {
	s.used.Range(func(k, v any) bool {
		if !now.Before(v.(time.Time)) {
			s.used.Delete(k)
		}
		return true
	})
}

// nameOf is the name players see a redeemed character by: a saved character's own
// (read by its owner, the token's subject), a guest's made from its id. A name that
// cannot be read costs the player its label, not its admission: the map shows no name.
func (s *Service) nameOf(ctx context.Context, c ticket.Claims) string {
	if IsDisposable(c.CharacterID) {
		return GuestName(c.CharacterID)
	}
	ch, err := s.Store.OwnedCharacter(ctx, c.Subject, c.CharacterID)
	if err != nil {
		s.Log.Warn("character name not read", "character", c.CharacterID, "err", err)
		return ""
	}
	return ch.Name
}

// GuestName is the name of a disposable character: "Guest" and the first four letters
// or digits of its random id, so that two guests on one map can be told apart.
func GuestName(characterID string) string {
	tag := make([]rune, 0, 4)
	for _, r := range strings.TrimPrefix(characterID, guestIDPrefix) {
		if len(tag) == cap(tag) {
			break
		}
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			tag = append(tag, r)
		}
	}
	return strings.TrimSpace("Guest " + string(tag))
}

// state is the character's last saved state (nil if never saved). Disposable characters
// carry theirs in memory from the source map to the destination, and a join of one
// (a rejoin) enters with the state its map last pushed.
func (s *Service) state(ctx context.Context, characterID, transferID string) (*record.CharacterState, error) {
	if IsDisposable(characterID) {
		s.mu.Lock()
		st, handed := s.handovers[transferID]
		delete(s.handovers, transferID)
		s.mu.Unlock()
		if handed {
			return st, nil
		}
		return s.guestState(characterID), nil
	}
	st, err := s.Store.CharacterState(ctx, characterID)
	if apierr.Code(err) == apierr.ENOTFOUND {
		return nil, nil
	}
	return st, err
}

// heldItems is what a redeem answers of the items the character holds: every live item
// of a saved character (read after the admission committed, under its new lease, so no
// map can change them meanwhile), none for a disposable one. Never nil, so that a map
// tells "holds nothing" from an orchestrator that does not answer items.
func (s *Service) heldItems(ctx context.Context, characterID string) ([]items.Item, error) {
	if IsDisposable(characterID) {
		return []items.Item{}, nil
	}
	held, err := s.Store.CharacterItems(ctx, characterID)
	if err != nil {
		return nil, fmt.Errorf("redeem: items of %q: %w", characterID, err)
	}
	if held == nil {
		held = []items.Item{}
	}
	return held, nil
}
