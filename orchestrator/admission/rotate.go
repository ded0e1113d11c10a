package admission

import (
	"context"
	"fmt"

	"github.com/mapyard/mapyard/orchestrator/apierr"
)

// rekey moves a saved character found under the authKey hash of the previous root
// secret to keyHash, the hash under the current one. Raw authKeys are never stored, so
// hashes cannot be recomputed in bulk after a rotation: each character moves when its
// player next joins, and the previous root is kept (ORCH_PREVIOUS_INTERNAL_RPC_SECRET or
// the .previous file) until the operator decides that players who have not come back
// by then start over.
func (s *Service) rekey(ctx context.Context, authKey, keyHash string) error {
	if s.PreviousKeys == nil {
		return nil
	}
	if _, err := s.Store.FindCharacterByKeyHash(ctx, keyHash); err == nil || apierr.Code(err) != apierr.ENOTFOUND {
		return err
	}
	oldHash, err := s.PreviousKeys.Hash(authKey)
	if err != nil {
		return err
	}
	ch, err := s.Store.FindCharacterByKeyHash(ctx, oldHash)
	if apierr.Code(err) == apierr.ENOTFOUND {
		return nil // a new player
	} else if err != nil {
		return fmt.Errorf("find character under the previous root: %w", err)
	}
	err = s.Store.RekeyCharacter(ctx, ch.ID, oldHash, keyHash)
	if err != nil && apierr.Code(err) != apierr.ENOTFOUND { // ENOTFOUND: a concurrent join moved it
		return err
	}
	s.Log.Info("character moved to the current root's key hash", "character", ch.ID)
	return nil
}
