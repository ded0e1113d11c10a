// Package admission decides who enters which map: it resolves identities into
// characters, mints join tickets and transfer tokens, redeems them exactly once, runs the
// transfer state machine, and keeps the authority lease that makes one character
// authoritative in at most one map instance at a time.
package admission

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/ticket"
)

// Maps is what admission needs from the supervisor.
type Maps interface {
	// Acquire returns a ready instance, starting it if it is not running and waiting a
	// bounded time for it. Error codes: EMAPQUARANTINED, EMAPUNAVAILABLE, ENOTFOUND.
	Acquire(ctx context.Context, instanceID string) (orchestrator.Instance, error)

	// Gate returns the instance if it can take players now, without starting it. Error
	// codes: EMAPQUARANTINED, EMAPUNAVAILABLE.
	Gate(instanceID string) (orchestrator.Instance, error)

	// Create adds a wanted instance and starts it. Error codes: EBADREQUEST, ECONFLICT
	// (it exists already).
	Create(ctx context.Context, r orchestrator.CreateInstance) (orchestrator.Instance, error)

	// HandingOff reports whether the instance's previous container hands its players
	// over to its next one (a live upgrade): only then is a handoff transfer granted.
	HandingOff(instanceID string) bool
}

// Store is the persistence admission uses.
type Store interface {
	orchestrator.CharacterStore
	orchestrator.NonceStore
	orchestrator.AdmissionStore
	orchestrator.CriticalEventStore
	orchestrator.TransferStore
	// CharacterItems answers a redeem with the items the character holds, so the map
	// admits its player with one call (orchestrator.ItemStore's).
	CharacterItems(ctx context.Context, characterID string) ([]items.Item, error)
}

// Defaults.
const (
	DefaultTTL           = 10 * time.Second
	DefaultGuestLeaseTTL = 24 * time.Hour
	// DefaultMaxGuests bounds the disposable characters held in memory (a few hundred
	// bytes each): enough for a busy host, small enough that a flood of guest joins
	// cannot exhaust the orchestrator.
	DefaultMaxGuests = 10000
	// DefaultSessionIdle is how long after its last sign of life (a join, a transfer or
	// a state push from its map) a character held by a map still counts as in play.
	// Maps push every MAP_SNAPSHOT_PUSH_MS (10 s by default), so three pushes missed
	// mean the player has left.
	DefaultSessionIdle  = 30 * time.Second
	disposablePrefix    = "~" // Subject of a disposable session; never a base64url key hash
	guestIDPrefix       = "guest-"
	transferEventPrefix = "transfer-"
)

// Service is the admission service. Set the exported fields (NewService does), Open it
// to start its sweeper, then use it from any goroutine; Close stops the sweeper.
type Service struct {
	Signer *ticket.Signer
	Keys   *ticket.KeyHasher
	// PreviousKeys hashes authKeys as the root secret before the last rotation did; nil
	// when there is none. See rekey.
	PreviousKeys *ticket.KeyHasher
	Store        Store
	Maps         Maps
	Log          *slog.Logger
	// Wanted finds the configs of running instances, the parents of derived maps;
	// NewService sets it when the store provides it.
	Wanted WantedInstances
	Now    func() time.Time

	JoinTTL, TransferTTL time.Duration
	DefaultInstanceID    string
	// DefaultMapID is the map DefaultInstanceID runs (ORCH_DEFAULT_MAP_ID). A portal to
	// it leads to DefaultInstanceID, whatever that instance is called, so a deployment
	// runs one default map, never a second one named after the map id.
	DefaultMapID string
	// Templates are the map templates a portal's target map is started from: the kit's,
	// with the host's laid over them (nil: the kit's alone).
	Templates *mapgen.Templates
	// GuestLeaseTTL bounds the memory disposable characters hold: a guest lease not
	// renewed for this long is forgotten by Sweep (its player re-joins as a new guest).
	GuestLeaseTTL time.Duration
	// MaxGuests bounds the disposable characters (their leases and hand-overs) held in
	// memory; past it guest joins are refused with ECAPACITY until guests leave or are
	// forgotten. Players with an authKey are not affected. 0 means no bound.
	MaxGuests int
	// SweepInterval is how often the sweeper started by Open runs Sweep.
	SweepInterval time.Duration
	// MaxCharactersPerKey caps the characters one identity owns
	// (ORCH_MAX_CHARACTERS_PER_KEY); 0 means no cap.
	MaxCharactersPerKey int
	// SessionIdle is how long a character held by a map counts as in play after its
	// last sign of life (ORCH_SESSION_IDLE_MS): it cannot be deleted meanwhile, and
	// GET /admin/sessions shows it active.
	SessionIdle time.Duration
	// RejoinTTL is how long a rejoin credential works (see Rejoin).
	RejoinTTL time.Duration
	// Metrics counts joins, redeems and transfers; nil counts nothing.
	Metrics *Metrics

	cancel context.CancelCauseFunc // stops the sweeper; nil until Open
	swept  chan struct{}           // closed when the sweeper has returned

	locks [64]sync.Mutex // per-character critical sections, striped
	seed  maphash.Seed

	used sync.Map // nonce → expiry: replays this process saw are refused without a write

	mu        sync.Mutex
	guests    map[string]guestLease             // leases of disposable characters: never persisted
	handovers map[string]*record.CharacterState // final states of disposable characters in transit
}

// NewService returns a Service signing tickets and hashing authKeys with keys derived
// from root.
func NewService(root *keys.Root, store Store, maps Maps, defaultInstanceID string, log *slog.Logger) *Service {
	return &Service{
		Signer: ticket.NewSigner(root.TicketKey()), Keys: ticket.NewKeyHasher(root.AuthKeyHashKey()),
		Store: store, Maps: maps, Log: log, Now: time.Now,
		JoinTTL: DefaultTTL, TransferTTL: DefaultTTL, DefaultInstanceID: defaultInstanceID,
		DefaultMapID: mapgen.DefaultMapID, seed: maphash.MakeSeed(), guests: make(map[string]guestLease), GuestLeaseTTL: DefaultGuestLeaseTTL, MaxGuests: DefaultMaxGuests,
		handovers: make(map[string]*record.CharacterState), SweepInterval: DefaultSweepInterval,
		MaxCharactersPerKey: orchestrator.DefaultMaxCharactersPerKey, SessionIdle: DefaultSessionIdle, RejoinTTL: DefaultRejoinTTL,
		Wanted: wanted(store),
	}
}

// wanted returns the store as WantedInstances if it is one.
func wanted(store Store) WantedInstances {
	if w, ok := store.(WantedInstances); ok {
		return w
	}
	return nil
}

// guestLease is a disposable character's lease, when it was last set, and the state
// its map last pushed (never persisted: a rejoin after a map crash starts from it).
type guestLease struct {
	orchestrator.Lease
	at    time.Time
	state *record.CharacterState
}

// forgetIdleGuests drops guest leases older than GuestLeaseTTL and reports how many.
func (s *Service) forgetIdleGuests(now time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for id, g := range s.guests {
		if now.Sub(g.at) >= s.GuestLeaseTTL {
			delete(s.guests, id)
			n++
		}
	}
	return n
}

// guestsFullLocked reports whether no new disposable character fits in memory. The
// caller holds s.mu.
func (s *Service) guestsFullLocked() bool {
	return s.MaxGuests > 0 && len(s.guests) >= s.MaxGuests
}

// errGuestsFull is the answer to a guest past MaxGuests.
var errGuestsFull = &apierr.Error{Code: apierr.ECAPACITY, Message: "this server holds as many guest players as it may; try again later, or join with an authKey"}

// GuestsFull reports whether a new disposable character would be refused now.
func (s *Service) GuestsFull() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.guestsFullLocked()
}

// guestWontFit reports whether characterID is a disposable character that holds no
// lease yet and would not fit.
func (s *Service) guestWontFit(characterID string) bool {
	if !IsDisposable(characterID) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, held := s.guests[characterID]
	return !held && s.guestsFullLocked()
}

// Guests is the number of disposable characters held in memory.
func (s *Service) Guests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.guests)
}

// lock serializes everything that reads and then changes one character's lease.
func (s *Service) lock(characterID string) func() {
	m := &s.locks[maphash.String(s.seed, characterID)%uint64(len(s.locks))]
	m.Lock()
	return m.Unlock
}

// IsDisposable reports whether a character id names a disposable session character.
func IsDisposable(characterID string) bool { return strings.HasPrefix(characterID, guestIDPrefix) }

// Join resolves the identity of r into a character and returns a join ticket for the
// map it should enter: the instance it was last saved in if that map is ready, else the
// default map. With an authKey it enters the character r names (EFORBIDDEN unless the
// key owns it), else the identity's selected one, else a new default one. Error codes:
// EBADREQUEST (bad authKey or name), EFORBIDDEN, ECAPACITY (no room for another guest),
// ESTATEINCOMPATIBLE (the character's saved state cannot be loaded), EMAPQUARANTINED,
// EMAPUNAVAILABLE (the default map cannot take players).
func (s *Service) Join(ctx context.Context, r public.JoinRequest) (res *public.JoinResponse, err error) {
	defer func(start time.Time) {
		guest := r.AuthKey == "" // a rejoin counts as what it entered
		if res != nil {
			guest = res.Disposable
		}
		s.Metrics.joined(guest, start, err)
	}(time.Now())
	return s.join(ctx, r)
}

// join is Join without its metrics.
func (s *Service) join(ctx context.Context, r public.JoinRequest) (*public.JoinResponse, error) {
	if r.Rejoin != "" {
		return s.rejoin(ctx, r)
	}
	name, err := cleanName(r.Name)
	if err != nil {
		return nil, err
	}
	var characterID, subject, target string
	if r.AuthKey == "" {
		if s.GuestsFull() {
			return nil, errGuestsFull
		}
		characterID, subject = guestIDPrefix+ticket.NewID(9), disposablePrefix+ticket.NewID(12)
	} else {
		keyHash, err := s.Keys.Hash(r.AuthKey)
		if err != nil {
			return nil, err
		}
		if err := s.rekey(ctx, r.AuthKey, keyHash); err != nil {
			return nil, err
		}
		ch, err := s.joinCharacter(ctx, keyHash, r.CharacterID, name)
		if err != nil {
			return nil, err
		}
		characterID, subject = ch.ID, keyHash
		if st, err := s.Store.CharacterState(ctx, ch.ID); err == nil {
			target = st.InstanceID
		} else if apierr.Code(err) != apierr.ENOTFOUND {
			return nil, fmt.Errorf("join: character state: %w", err)
		}
	}

	inst, err := s.joinTarget(ctx, target)
	if err != nil {
		return nil, err
	}
	return s.ticket(characterID, subject, inst)
}

// ticket mints a join ticket for characterID into inst, with the session's next rejoin
// credential.
func (s *Service) ticket(characterID, subject string, inst orchestrator.Instance) (*public.JoinResponse, error) {
	now := s.Now()
	c := ticket.Claims{
		Kind: ticket.KindJoin, ID: ticket.NewID(12), Subject: subject, CharacterID: characterID,
		From: "-", To: inst.ID, IssuedAtMs: now.UnixMilli(), ExpiresAtMs: now.Add(s.JoinTTL).UnixMilli(),
		Nonce: ticket.NewID(16),
	}
	tok, err := s.Signer.Mint(c)
	if err != nil {
		return nil, fmt.Errorf("join: mint: %w", err)
	}
	rejoin, err := s.mintRejoin(characterID, subject, now)
	if err != nil {
		return nil, fmt.Errorf("join: mint rejoin: %w", err)
	}
	s.Log.Info("join ticket issued", "joinId", c.ID, "character", characterID, "instance", inst.ID, "disposable", IsDisposable(characterID))
	return &public.JoinResponse{
		Ticket: tok, CharacterID: characterID, Disposable: IsDisposable(characterID),
		MapID: inst.MapID, InstanceID: inst.ID, WS: public.WSPath(inst.ID), ExpiresAtMs: c.ExpiresAtMs,
		Rejoin: rejoin,
	}, nil
}

// joinTarget is the character's last instance if it is ready, else the default map
// (seed 000's failure policy).
func (s *Service) joinTarget(ctx context.Context, last string) (orchestrator.Instance, error) {
	if last != "" && last != s.DefaultInstanceID {
		if inst, err := s.Maps.Gate(last); err == nil {
			return inst, nil
		}
	}
	return s.Maps.Acquire(ctx, s.DefaultInstanceID)
}

// joinCharacter is the character a join with an authKey enters: the one it names if the
// identity owns it (EFORBIDDEN otherwise, whether or not it exists), else the selected
// one, else a new default character named name. Two first joins racing with one key
// create one character: the loser of the insert reads the winner's.
func (s *Service) joinCharacter(ctx context.Context, keyHash, characterID, name string) (*orchestrator.Character, error) {
	if characterID != "" {
		ch, err := s.Store.OwnedCharacter(ctx, keyHash, characterID)
		if apierr.Code(err) == apierr.ENOTFOUND {
			return nil, apierr.Errorf(apierr.EFORBIDDEN, "this authKey owns no such character")
		}
		return ch, err
	}
	for attempt := 0; attempt < 2; attempt++ {
		ch, err := s.Store.SelectedCharacter(ctx, keyHash)
		if err == nil {
			return ch, nil
		} else if apierr.Code(err) != apierr.ENOTFOUND {
			return nil, fmt.Errorf("find character: %w", err)
		}
		ch = &orchestrator.Character{KeyHash: keyHash, Name: name}
		if err := s.Store.CreateCharacter(ctx, ch, s.MaxCharactersPerKey); err == nil {
			s.Log.Info("character created", "character", ch.ID)
			return ch, nil
		} else if code := apierr.Code(err); code != apierr.EBADREQUEST && code != apierr.ECONFLICT {
			return nil, fmt.Errorf("create character: %w", err)
		}
	}
	return nil, errors.New("create character: lost the race twice")
}

// cleanName is the name a join gives a new identity's first character: the one it sent
// if valid, else the default when it sent none.
func cleanName(name string) (string, error) {
	if strings.TrimSpace(name) == "" {
		return orchestrator.DefaultCharacterName, nil
	}
	return orchestrator.CleanCharacterName(name)
}

// lease returns a character's lease: from memory for disposable characters, from the
// store for saved ones.
func (s *Service) lease(ctx context.Context, characterID string) (orchestrator.Lease, error) {
	if IsDisposable(characterID) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.guests[characterID].Lease, nil
	}
	return s.Store.Lease(ctx, characterID)
}

// setLease replaces a lease held by the caller's character lock.
func (s *Service) setLease(ctx context.Context, l orchestrator.Lease, prevEpoch int64) error {
	if IsDisposable(l.CharacterID) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.guests[l.CharacterID].Epoch != prevEpoch {
			return apierr.Errorf(apierr.ECONFLICT, "lease of %q changed", l.CharacterID)
		}
		if l.InstanceID == "" && l.TransferID == "" {
			delete(s.guests, l.CharacterID)
			return nil
		}
		prev, held := s.guests[l.CharacterID]
		if !held && s.guestsFullLocked() {
			return errGuestsFull
		}
		l.UpdatedAt = s.Now()
		// The pushed state stays while the character stays on its map (a rejoin there
		// starts from it); a transfer carries its own.
		g := guestLease{Lease: l, at: l.UpdatedAt}
		if prev.InstanceID == l.InstanceID {
			g.state = prev.state
		}
		s.guests[l.CharacterID] = g
		return nil
	}
	return s.Store.SetLease(ctx, l, prevEpoch)
}

// Authorize checks that instanceID holds characterID's lease at epoch: the gate every
// per-character write from a map passes, so a map that lost a character (to a transfer
// or a second login) can no longer change it, and no map can change a character it
// never held. Error codes: EFORBIDDEN (another instance, or none, holds the character),
// ECONFLICT (this instance holds it at another epoch: a second login in the same map).
func (s *Service) Authorize(ctx context.Context, characterID, instanceID string, epoch int64) error {
	l, err := s.lease(ctx, characterID)
	if err != nil {
		return err
	}
	return holds(l, characterID, instanceID, epoch)
}

// holds is Authorize's rule over a lease already read.
func holds(l orchestrator.Lease, characterID, instanceID string, epoch int64) error {
	switch {
	case l.InstanceID != instanceID || instanceID == "":
		return apierr.Errorf(apierr.EFORBIDDEN, "character %q is not held by map instance %q", characterID, instanceID)
	case l.Epoch != epoch:
		return apierr.Errorf(apierr.ECONFLICT, "character %q is not authoritative in %q at epoch %d", characterID, instanceID, epoch)
	}
	return nil
}

// Lease returns a character's current lease.
func (s *Service) Lease(ctx context.Context, characterID string) (orchestrator.Lease, error) {
	return s.lease(ctx, characterID)
}
