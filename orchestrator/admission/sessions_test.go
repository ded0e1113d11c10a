package admission_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
)

// sessionOf returns the session of characterID, failing the test if there is none.
func sessionOf(t *testing.T, e *env, characterID string) orchestrator.Session {
	t.Helper()
	list, err := e.svc.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.CharacterID == characterID {
			return s
		}
	}
	t.Fatalf("no session of %s in %+v", characterID, list)
	return orchestrator.Session{}
}

// TestSessions_InPlay checks when a saved character counts as in play: after its join
// it is active and cannot be deleted; once its map has shown no sign of life for it for
// SessionIdle it is idle and may be deleted; a state push makes it active again; and in
// transit it is never deletable.
func TestSessions_InPlay(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := enter(t, e, authKey)
	if s := sessionOf(t, e, r.CharacterID); s.State != orchestrator.SessionActive || s.InstanceID != "default-1" || s.Epoch != r.Epoch {
		t.Fatalf("after the join: %+v", s)
	}
	wantCode(t, e.svc.DeleteCharacter(ctx, authKey, r.CharacterID), apierr.ECHARACTERINPLAY)

	e.clock.Add(e.svc.SessionIdle)
	if s := sessionOf(t, e, r.CharacterID); s.State != orchestrator.SessionIdle {
		t.Fatalf("after %s without a sign of life: %+v", e.svc.SessionIdle, s)
	}
	payload := json.RawMessage(`{"mapId":"default","instanceId":"default-1","x":1,"y":2}`)
	if _, err := e.db.PutSnapshot(ctx, "default-1", record.CharacterPartition(r.CharacterID), 1,
		record.NewSnapshotEnvelope("sim-1", 1, e.clock.Now().UnixMilli(), payload)); err != nil {
		t.Fatal(err)
	}
	if s := sessionOf(t, e, r.CharacterID); s.State != orchestrator.SessionActive || s.LastSeenMs != e.clock.Now().UnixMilli() {
		t.Fatalf("after a push: %+v", s)
	}

	other := "Other0Key0123456789abcdefgh"
	r2 := enter(t, e, other)
	if _, err := e.svc.RequestTransfer(ctx, transferReq("tr-1", r2, "default-1", "frontier", 3)); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Hour)
	s := sessionOf(t, e, r2.CharacterID)
	if s.State != orchestrator.SessionInTransit || s.TransferID != "tr-1" || s.LastTransfer == nil || s.LastTransfer.TransferID != "tr-1" {
		t.Fatalf("in transit: %+v", s)
	}
	wantCode(t, e.svc.DeleteCharacter(ctx, other, r2.CharacterID), apierr.ECHARACTERINPLAY)

	if err := e.svc.DeleteCharacter(ctx, authKey, r.CharacterID); err != nil {
		t.Fatalf("delete once idle: %v", err)
	}
	// A ticket minted before the delete admits no one.
	j := e.join(t, authKey) // a new default character
	if err := e.svc.DeleteCharacter(ctx, authKey, j.CharacterID); err != nil {
		t.Fatal(err)
	}
	_, err := e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: j.Ticket})
	wantCode(t, err, apierr.ETICKETINVALID)
}

// TestCleanup_Counts checks that cleanup removes expired nonces, finished transfers
// whose tokens expired and stale guest leases, reports how many, and then finds nothing.
func TestCleanup_Counts(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	guest, err := e.svc.Join(ctx, public.JoinRequest{})
	if err != nil {
		t.Fatal(err)
	}
	e.redeem(t, "default-1", guest.Ticket)
	r := enter(t, e, authKey)
	a, err := e.svc.RequestTransfer(ctx, transferReq("tr-1", r, "default-1", "frontier", 3))
	if err != nil {
		t.Fatal(err)
	}
	e.redeem(t, "frontier-1", a.Token)
	if err := e.svc.TransferResult(ctx, mapcontract.TransferResult{TransferID: "tr-1", InstanceID: "frontier-1", Success: true}); err != nil {
		t.Fatal(err)
	}
	if res, err := e.svc.Cleanup(ctx); err != nil || res != (orchestrator.CleanupResult{}) {
		t.Fatalf("cleanup right away: %+v %v, want nothing removed", res, err)
	}

	e.clock.Add(e.svc.GuestLeaseTTL)
	res, err := e.svc.Cleanup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (orchestrator.CleanupResult{Nonces: 3, Transfers: 1, GuestLeases: 1}); res != want {
		t.Fatalf("cleanup removed %+v, want %+v", res, want)
	}
	if res, err := e.svc.Cleanup(ctx); err != nil || res != (orchestrator.CleanupResult{}) {
		t.Fatalf("second cleanup: %+v %v", res, err)
	}
	if s := sessionOf(t, e, r.CharacterID); s.InstanceID != "frontier-1" || s.LastTransfer != nil {
		t.Fatalf("after cleanup: %+v", s)
	}
}
