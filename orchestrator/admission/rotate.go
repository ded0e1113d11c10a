package admission

import (
	"context"
	"fmt"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// rekey moves the saved characters found under the authKey hash of the previous root
// secret to keyHash, the hash under the current one. Raw authKeys are never stored, so
// hashes cannot be recomputed in bulk after a rotation: each identity moves when its
// player next joins or calls the character API, and the previous root is kept
// (ORCH_PREVIOUS_INTERNAL_RPC_SECRET or the .previous file) until the operator decides
// that players who have not come back by then start over.
func (s *Service) rekey(ctx context.Context, authKey, keyHash string) error {
	if s.PreviousKeys == nil {
		return nil
	}
	if _, err := s.Store.SelectedCharacter(ctx, keyHash); err == nil || apierr.Code(err) != apierr.ENOTFOUND {
		return err
	}
	oldHash, err := s.PreviousKeys.Hash(authKey)
	if err != nil {
		return err
	}
	if _, err := s.Store.SelectedCharacter(ctx, oldHash); apierr.Code(err) == apierr.ENOTFOUND {
		return nil // a new player
	} else if err != nil {
		return fmt.Errorf("find characters under the previous root: %w", err)
	}
	n, err := s.Store.RekeyIdentity(ctx, oldHash, keyHash)
	if err != nil {
		return err
	}
	if n > 0 {
		s.Log.Info("characters moved to the current root's key hash", "characters", n)
	}
	return nil
}
