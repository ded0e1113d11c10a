package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestRejoin_GuestAfterMapCrash plays what a crashed map leaves a guest with: its state
// pushed through the map route (kept in memory, never in the store), then, the map's
// resume token gone, a rejoin over the public route that comes back as the same guest
// with that state at the redeem; a second use of the credential is refused.
func TestRejoin_GuestAfterMapCrash(t *testing.T) {
	s, db := MustOpenServer(t)
	var j public.JoinResponse
	testutil.PostJSON(t, s.PublicURL()+public.PathJoin, "", `{}`, http.StatusOK, &j)
	var r mapcontract.RedeemResult
	testutil.PostJSON(t, s.ControlURL()+mapcontract.PathRedeem, as(t, "default-1"), mapcontract.RedeemRequest{InstanceID: "default-1", Token: j.Ticket}, http.StatusOK, &r)
	if !r.Disposable || j.Rejoin == "" {
		t.Fatalf("join %+v redeem %+v: want a guest with a rejoin credential", j, r)
	}

	payload := json.RawMessage(`{"mapId":"default","instanceId":"default-1","x":12.5,"y":7}`)
	snap := mapcontract.PersistSnapshot{
		InstanceID: "default-1", Partition: record.CharacterPartition(r.CharacterID), Revision: 5, Epoch: r.Epoch,
		Envelope: record.NewSnapshotEnvelope("sim-1", 10, 0, payload),
	}
	var a mapcontract.PersistSnapshotAnswer
	testutil.PostJSON(t, s.ControlURL()+mapcontract.PathPersistSnapshot, as(t, "default-1"), snap, http.StatusOK, &a)
	if !a.Accepted {
		t.Fatal("the guest's push was not accepted")
	}
	if got, err := db.Snapshot(context.Background(), "default-1", snap.Partition); apierr.Code(err) != apierr.ENOTFOUND {
		t.Fatalf("the store holds the guest's push: %+v %v", got, err)
	}

	var again public.JoinResponse
	testutil.PostJSON(t, s.PublicURL()+public.PathJoin, "", public.JoinRequest{Rejoin: j.Rejoin}, http.StatusOK, &again)
	if again.CharacterID != j.CharacterID || !again.Disposable || again.Rejoin == "" {
		t.Fatalf("rejoin %+v, want the same guest", again)
	}
	var back mapcontract.RedeemResult
	testutil.PostJSON(t, s.ControlURL()+mapcontract.PathRedeem, as(t, "default-1"), mapcontract.RedeemRequest{InstanceID: "default-1", Token: again.Ticket}, http.StatusOK, &back)
	if back.State == nil || back.State.X != 12.5 || back.State.Y != 7 {
		t.Fatalf("the rejoined guest enters with %+v, want its last push", back.State)
	}

	var e httpkit.ErrorResponse
	testutil.PostJSON(t, s.PublicURL()+public.PathJoin, "", public.JoinRequest{Rejoin: j.Rejoin}, http.StatusConflict, &e)
	if e.Error.Code != apierr.ETICKETUSED || strings.Contains(e.Error.Message, j.Rejoin) {
		t.Fatalf("a second rejoin with the same credential: %+v", e.Error)
	}
}
