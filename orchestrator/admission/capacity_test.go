package admission_test

import (
	"context"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
)

// TestGuestCapacity checks that disposable characters held in memory are bounded: past
// MaxGuests a guest join and the redeem of a guest ticket issued before are refused with
// ECAPACITY, players with an authKey still get in, and room comes back once idle guests
// are forgotten.
func TestGuestCapacity(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.svc.MaxGuests = 3
	e.svc.GuestLeaseTTL = time.Minute
	late := e.join(t, "") // issued while there is room, redeemed once there is none
	for i := 0; i < 3; i++ {
		e.redeem(t, "default-1", e.join(t, "").Ticket)
	}
	if got := e.svc.Guests(); got != 3 {
		t.Fatalf("Guests() = %d, want 3", got)
	}

	t.Run("ErrCapacityOnJoin", func(t *testing.T) {
		_, err := e.svc.Join(ctx, public.JoinRequest{})
		wantCode(t, err, apierr.ECAPACITY)
	})
	t.Run("ErrCapacityOnRedeem", func(t *testing.T) {
		_, err := e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: late.Ticket})
		wantCode(t, err, apierr.ECAPACITY)
	})
	t.Run("SavedCharactersStillJoin", func(t *testing.T) {
		e.redeem(t, "default-1", e.join(t, authKey).Ticket)
	})
	t.Run("RoomAfterIdleGuestsForgotten", func(t *testing.T) {
		e.clock.Add(2 * time.Minute)
		if _, err := e.svc.Sweep(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		if got := e.svc.Guests(); got != 0 {
			t.Fatalf("Guests() = %d after the sweep, want 0", got)
		}
		e.redeem(t, "default-1", e.join(t, "").Ticket)
	})
}
