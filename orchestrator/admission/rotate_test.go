package admission_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator/admission"
	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/testutil"
	"github.com/mapyard/mapyard/orchestrator/ticket"
)

// TestRootRotation checks that rotating the root secret keeps saved characters: with the
// previous root configured, a player's next join finds the character saved under the
// old authKey hash and moves it to the new one; without it, the player would start over.
func TestRootRotation(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	before := e.join(t, authKey)

	rotated, err := keys.NewRoot(secret + "-rotated")
	if err != nil {
		t.Fatal(err)
	}
	svc := admission.NewService(rotated, e.db, e.maps, "default-1", slog.New(slog.DiscardHandler))
	svc.Now = e.clock.Now
	svc.PreviousKeys = ticket.NewKeyHasher(testutil.Root(t, secret).AuthKeyHashKey())

	after, err := svc.Join(ctx, public.JoinRequest{AuthKey: authKey})
	if err != nil {
		t.Fatal(err)
	}
	if after.CharacterID != before.CharacterID {
		t.Fatalf("after rotation the key joins %s, want the saved %s", after.CharacterID, before.CharacterID)
	}
	t.Run("MovedToTheNewHash", func(t *testing.T) {
		newHash, _ := svc.Keys.Hash(authKey)
		if ch, err := e.db.SelectedCharacter(ctx, newHash); err != nil || ch.ID != before.CharacterID {
			t.Fatalf("under the new hash: %+v %v", ch, err)
		}
		oldHash, _ := svc.PreviousKeys.Hash(authKey)
		if _, err := e.db.SelectedCharacter(ctx, oldHash); apierr.Code(err) != apierr.ENOTFOUND {
			t.Fatalf("still under the old hash: %v", err)
		}
	})
	t.Run("OtherKeysUnaffected", func(t *testing.T) {
		other, err := svc.Join(ctx, public.JoinRequest{AuthKey: authKey + "x"})
		if err != nil || other.CharacterID == before.CharacterID {
			t.Fatalf("another key: %+v %v", other, err)
		}
	})
	t.Run("WithoutPreviousRootTheKeyStartsOver", func(t *testing.T) {
		e2 := newEnv(t)
		saved := e2.join(t, authKey)
		fresh := admission.NewService(rotated, e2.db, e2.maps, "default-1", slog.New(slog.DiscardHandler))
		got, err := fresh.Join(ctx, public.JoinRequest{AuthKey: authKey})
		if err != nil || got.CharacterID == saved.CharacterID {
			t.Fatalf("join %+v %v: without the previous root the saved character cannot be found", got, err)
		}
	})
}
