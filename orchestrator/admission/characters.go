package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/ticket"
)

// identity turns the authKey of a character API call into its keyed hash, first moving
// the identity's characters from the previous root's hash if there was a rotation. A
// missing or malformed key is EUNAUTHORIZED, with a message that never repeats it.
func (s *Service) identity(ctx context.Context, authKey string) (string, error) {
	if authKey == "" {
		return "", apierr.Errorf(apierr.EUNAUTHORIZED, "this call needs the header Authorization: Bearer followed by the authKey")
	}
	if err := ticket.ValidateAuthKey(authKey); err != nil {
		return "", apierr.Errorf(apierr.EUNAUTHORIZED, "%s", apierr.Message(err))
	}
	keyHash, err := s.Keys.Hash(authKey)
	if err != nil {
		return "", err
	}
	if err := s.rekey(ctx, authKey, keyHash); err != nil {
		return "", err
	}
	return keyHash, nil
}

// Characters lists the characters of the identity authKey names, oldest first, the
// selected one marked. Error codes: EUNAUTHORIZED.
func (s *Service) Characters(ctx context.Context, authKey string) ([]orchestrator.CharacterSummary, error) {
	keyHash, err := s.identity(ctx, authKey)
	if err != nil {
		return nil, err
	}
	list, err := s.Store.Characters(ctx, keyHash)
	if err != nil {
		return nil, err
	}
	out := make([]orchestrator.CharacterSummary, len(list))
	for i, c := range list {
		out[i] = c.Summary()
	}
	return out, nil
}

// CreateCharacter creates a character for the identity authKey names; it becomes the
// selected one if it is the identity's first. Error codes: EUNAUTHORIZED, EBADREQUEST
// (a name that breaks orchestrator.CleanCharacterName's rules or is already used by
// another character of the identity), ECHARACTERLIMIT (MaxCharactersPerKey reached).
func (s *Service) CreateCharacter(ctx context.Context, authKey, name string) (orchestrator.CharacterSummary, error) {
	keyHash, err := s.identity(ctx, authKey)
	if err != nil {
		return orchestrator.CharacterSummary{}, err
	}
	if name, err = orchestrator.CleanCharacterName(name); err != nil {
		return orchestrator.CharacterSummary{}, err
	}
	c := &orchestrator.Character{KeyHash: keyHash, Name: name}
	if err := s.Store.CreateCharacter(ctx, c, s.MaxCharactersPerKey); err != nil {
		return orchestrator.CharacterSummary{}, err
	}
	s.Log.Info("character created", "character", c.ID)
	return c.Summary(), nil
}

// SelectCharacter makes characterID the character the identity's joins enter. Error
// codes: EUNAUTHORIZED, ENOTFOUND (not a character of this identity, whether or not it
// exists).
func (s *Service) SelectCharacter(ctx context.Context, authKey, characterID string) error {
	keyHash, err := s.identity(ctx, authKey)
	if err != nil {
		return err
	}
	return s.Store.SelectCharacter(ctx, keyHash, characterID)
}

// DeleteCharacter deletes a character of the identity with its saved state and
// inventory, unless it is in play: held by a map that showed a sign of life for it
// within SessionIdle, or travelling between maps. Error codes: EUNAUTHORIZED,
// ENOTFOUND (not a character of this identity, whether or not it exists; checked before
// anything else, so the answer tells nothing about others' characters),
// ECHARACTERINPLAY.
func (s *Service) DeleteCharacter(ctx context.Context, authKey, characterID string) error {
	keyHash, err := s.identity(ctx, authKey)
	if err != nil {
		return err
	}
	if _, err := s.Store.OwnedCharacter(ctx, keyHash, characterID); err != nil {
		return err
	}
	// Under the character's lock no redeem or transfer can move its lease meanwhile.
	unlock := s.lock(characterID)
	defer unlock()
	l, err := s.lease(ctx, characterID)
	if err != nil {
		return err
	}
	switch state, _, err := s.activity(ctx, l); {
	case err != nil:
		return err
	case state == orchestrator.SessionActive:
		return apierr.Errorf(apierr.ECHARACTERINPLAY, "the character is playing in map instance %q; leave the game first", l.InstanceID)
	case state == orchestrator.SessionInTransit:
		return apierr.Errorf(apierr.ECHARACTERINPLAY, "the character is moving between maps; try again when it has arrived")
	}
	if err := s.Store.DeleteCharacter(ctx, keyHash, characterID); err != nil {
		return err
	}
	s.Log.Info("character deleted", "character", characterID)
	return nil
}

// activity says where a lease stands: in transit, active (its map showed a sign of life
// for the character within SessionIdle: the join or transfer that put it there, or a
// state push), idle, or "" for a lease that names no map. lastSeen is the newest push
// of the character's state from the lease's map, zero if none.
func (s *Service) activity(ctx context.Context, l orchestrator.Lease) (state string, lastSeen time.Time, err error) {
	switch {
	case l.TransferID != "":
		return orchestrator.SessionInTransit, time.Time{}, nil
	case l.InstanceID == "":
		return "", time.Time{}, nil
	case IsDisposable(l.CharacterID):
		return orchestrator.SessionGuest, time.Time{}, nil
	}
	st, err := s.Store.CharacterState(ctx, l.CharacterID)
	switch code := apierr.Code(err); {
	case err == nil && st.InstanceID == l.InstanceID:
		lastSeen = st.UpdatedAt
	case err == nil, code == apierr.ENOTFOUND, code == apierr.ESTATEINCOMPATIBLE:
	default:
		return "", time.Time{}, fmt.Errorf("character state: %w", err)
	}
	sign := l.UpdatedAt
	if lastSeen.After(sign) {
		sign = lastSeen
	}
	if s.Now().Sub(sign) < s.SessionIdle {
		return orchestrator.SessionActive, lastSeen, nil
	}
	return orchestrator.SessionIdle, lastSeen, nil
}
