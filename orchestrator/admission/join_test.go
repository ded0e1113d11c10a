package admission_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
)

func TestJoin(t *testing.T) {
	ctx := context.Background()
	t.Run("Disposable", func(t *testing.T) {
		e := newEnv(t)
		a, b := e.join(t, ""), e.join(t, "")
		if !a.Disposable || a.CharacterID == b.CharacterID {
			t.Fatalf("disposable joins %+v %+v: want distinct disposable characters", a, b)
		}
		if a.InstanceID != "default-1" || a.WS != "/maps/default-1/ws" || a.MapID != "default" {
			t.Fatalf("join %+v, want the default map", a)
		}
		if got := e.redeem(t, "default-1", a.Ticket); !got.Disposable || got.State != nil {
			t.Fatalf("redeem %+v", got)
		}
	})
	t.Run("SameKeySameCharacter", func(t *testing.T) {
		e := newEnv(t)
		a, b := e.join(t, authKey), e.join(t, authKey)
		if a.Disposable || a.CharacterID != b.CharacterID {
			t.Fatalf("joins %+v %+v: want one saved character", a, b)
		}
		if c := e.join(t, authKey+"x"); c.CharacterID == a.CharacterID {
			t.Fatal("another key got the same character")
		}
	})
	t.Run("ErrBadRequest", func(t *testing.T) {
		e := newEnv(t)
		for _, r := range []public.JoinRequest{
			{AuthKey: "short"}, {AuthKey: strings.Repeat("k", 129)}, {AuthKey: authKey + "/"},
			{Name: strings.Repeat("n", 33)}, {Name: "bad\x00name"},
		} {
			_, err := e.svc.Join(ctx, r)
			wantCode(t, err, apierr.EBADREQUEST)
		}
	})
	t.Run("ErrMapQuarantined", func(t *testing.T) {
		e := newEnv(t)
		e.maps.set("default-1", orchestrator.StateQuarantined)
		_, err := e.svc.Join(ctx, public.JoinRequest{})
		wantCode(t, err, apierr.EMAPQUARANTINED)
	})
}

// TestAuthKeyNeverLeaks runs join, redeem, a transfer and failing requests with a known
// key and checks that the raw key appears in no log line, no database byte (main file
// and WAL) and no error message.
func TestAuthKeyNeverLeaks(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var errs []error
	j := e.join(t, authKey)
	r := e.redeem(t, "default-1", j.Ticket)
	_, err := e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: j.Ticket})
	errs = append(errs, err)
	_, err = e.svc.RequestTransfer(ctx, mapcontract.TransferRequest{
		TransferID: "tr-leak", CharacterID: r.CharacterID, FromInstanceID: "default-1", ToMapID: "frontier", Epoch: r.Epoch,
		State: record.CharacterState{MapID: "default", X: 10, Y: 20, Revision: 1},
	})
	errs = append(errs, err)
	_, err = e.svc.Join(ctx, public.JoinRequest{AuthKey: authKey + "!"})
	errs = append(errs, err)
	if _, err := e.db.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		if err != nil && strings.Contains(err.Error(), authKey) {
			t.Fatalf("error carries the raw key: %v", err)
		}
	}
	if strings.Contains(e.logs.String(), authKey) {
		t.Fatal("a log line carries the raw key")
	}
	if e.logs.Len() == 0 {
		t.Fatal("no logs were captured: the check above proves nothing")
	}
	for _, suffix := range []string{"", "-wal"} {
		buf, err := os.ReadFile(e.path + suffix)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if strings.Contains(string(buf), authKey) {
			t.Fatalf("database file %s carries the raw key", e.path+suffix)
		}
	}
}
