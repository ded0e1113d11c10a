package admission_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// push is what a map's state push does for a character it holds: the lease check, then
// the guest's state kept in memory.
func (e *env) push(tb testing.TB, r *mapcontract.RedeemResult, instance string, x, y float64, revision int64) {
	tb.Helper()
	if err := e.svc.Authorize(context.Background(), r.CharacterID, instance, r.Epoch); err != nil {
		tb.Fatalf("authorize the push: %v", err)
	}
	payload, _ := json.Marshal(record.CharacterStatePayload{MapID: "default", InstanceID: instance, X: x, Y: y})
	env := record.NewSnapshotEnvelope("test", 1, 1, payload)
	guest, kept, err := e.svc.KeepGuestState(r.CharacterID, instance, revision, env)
	if err != nil || guest != r.Disposable || kept != r.Disposable {
		tb.Fatalf("keep guest state: guest %v kept %v err %v (disposable %v)", guest, kept, err, r.Disposable)
	}
}

func TestRejoin(t *testing.T) {
	ctx := context.Background()
	rejoin := func(e *env, cred string) (*public.JoinResponse, error) {
		return e.svc.Join(ctx, public.JoinRequest{Rejoin: cred})
	}
	t.Run("GuestFromItsLastPush", func(t *testing.T) {
		e := newEnv(t)
		j := e.join(t, "")
		if j.Rejoin == "" {
			t.Fatal("a join answers no rejoin credential")
		}
		r := e.redeem(t, "default-1", j.Ticket)
		e.push(t, r, "default-1", 12.5, 40, 10)
		e.push(t, r, "default-1", 13.5, 41, 20)
		// The map crashed and came back: its resume token is gone, the credential is not.
		again, err := rejoin(e, j.Rejoin)
		if err != nil {
			t.Fatal(err)
		}
		if again.CharacterID != j.CharacterID || !again.Disposable || again.InstanceID != "default-1" || again.Rejoin == "" || again.Rejoin == j.Rejoin {
			t.Fatalf("rejoin %+v, want the same guest on default-1 with a new credential", again)
		}
		got := e.redeem(t, "default-1", again.Ticket)
		if got.CharacterID != j.CharacterID || got.State == nil || got.State.X != 13.5 || got.State.Y != 41 || got.Epoch != r.Epoch+1 {
			t.Fatalf("redeem of the rejoin %+v (state %+v), want the last push at epoch %d", got, got.State, r.Epoch+1)
		}
		// A fresh guest starts with nothing.
		if fresh := e.redeem(t, "default-1", e.join(t, "").Ticket); fresh.State != nil {
			t.Fatalf("a new guest enters with state %+v", fresh.State)
		}
	})
	t.Run("KeyedWhereItsLeaseIs", func(t *testing.T) {
		e := newEnv(t)
		j := e.join(t, authKey)
		e.redeem(t, "frontier-1", mustTransferTo(t, e, r0(t, e, j), "frontier"))
		again, err := rejoin(e, j.Rejoin)
		if err != nil {
			t.Fatal(err)
		}
		if again.CharacterID != j.CharacterID || again.Disposable || again.InstanceID != "frontier-1" {
			t.Fatalf("rejoin %+v, want the same character where its lease is", again)
		}
	})
	t.Run("ErrTicketUsed", func(t *testing.T) {
		e := newEnv(t)
		j := e.join(t, "")
		e.redeem(t, "default-1", j.Ticket)
		if _, err := rejoin(e, j.Rejoin); err != nil {
			t.Fatal(err)
		}
		_, err := rejoin(e, j.Rejoin)
		wantCode(t, err, apierr.ETICKETUSED)
	})
	t.Run("ErrTicketInvalid", func(t *testing.T) {
		e := newEnv(t)
		j := e.join(t, "")
		e.redeem(t, "default-1", j.Ticket)
		forged := j.Rejoin[:len(j.Rejoin)-2] + "AA"
		if forged == j.Rejoin {
			forged = j.Rejoin[:len(j.Rejoin)-2] + "BB"
		}
		_, err := rejoin(e, forged)
		wantCode(t, err, apierr.ETICKETINVALID)
		// A join ticket is not a rejoin credential, nor the other way round.
		_, err = rejoin(e, e.join(t, "").Ticket)
		wantCode(t, err, apierr.ETICKETINVALID)
		_, err = e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: j.Rejoin})
		wantCode(t, err, apierr.ETICKETINVALID)
		// A guest that was never admitted has no session to come back to.
		_, err = rejoin(e, e.join(t, "").Rejoin)
		wantCode(t, err, apierr.ETICKETINVALID)
		// A deleted character neither.
		k := e.join(t, authKey)
		e.redeem(t, "default-1", k.Ticket)
		e.clock.Add(time.Hour) // out of play
		if err := e.svc.DeleteCharacter(ctx, authKey, k.CharacterID); err != nil {
			t.Fatal(err)
		}
		_, err = rejoin(e, k.Rejoin)
		wantCode(t, err, apierr.ETICKETINVALID)
	})
	t.Run("ErrTicketExpired", func(t *testing.T) {
		e := newEnv(t)
		j := e.join(t, "")
		e.redeem(t, "default-1", j.Ticket)
		e.clock.Add(e.svc.RejoinTTL)
		_, err := rejoin(e, j.Rejoin)
		wantCode(t, err, apierr.ETICKETEXPIRED)
	})
	t.Run("ErrBadRequest", func(t *testing.T) {
		e := newEnv(t)
		j := e.join(t, authKey)
		_, err := e.svc.Join(ctx, public.JoinRequest{Rejoin: j.Rejoin, AuthKey: authKey})
		wantCode(t, err, apierr.EBADREQUEST)
	})
	t.Run("NeverLeaksTheKey", func(t *testing.T) {
		e := newEnv(t)
		if j := e.join(t, authKey); strings.Contains(j.Rejoin, authKey) {
			t.Fatal("the rejoin credential carries the raw key")
		}
	})
}

// r0 redeems join j on the default map.
func r0(t *testing.T, e *env, j *public.JoinResponse) *mapcontract.RedeemResult {
	t.Helper()
	return e.redeem(t, "default-1", j.Ticket)
}

// mustTransferTo asks for a transfer of r's character from the default map to mapID
// and returns its token.
func mustTransferTo(t *testing.T, e *env, r *mapcontract.RedeemResult, mapID string) string {
	t.Helper()
	a, err := e.svc.RequestTransfer(context.Background(), mapcontract.TransferRequest{
		TransferID: "tr-rejoin", CharacterID: r.CharacterID, FromInstanceID: "default-1", ToMapID: mapID, Epoch: r.Epoch,
		State: record.CharacterState{MapID: "default", X: 10, Y: 20, Revision: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a.Token
}
