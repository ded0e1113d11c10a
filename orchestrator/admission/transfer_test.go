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

// enter joins with key and redeems at the default map.
func enter(t *testing.T, e *env, key string) *mapcontract.RedeemResult {
	t.Helper()
	return e.redeem(t, "default-1", e.join(t, key).Ticket)
}

func transferReq(id string, r *mapcontract.RedeemResult, from, toMap string, x float64) mapcontract.TransferRequest {
	return mapcontract.TransferRequest{
		TransferID: id, CharacterID: r.CharacterID, FromInstanceID: from, ToMapID: toMap, Epoch: r.Epoch,
		State: record.CharacterState{MapID: from[:len(from)-2], X: x, Y: 2, Attributes: json.RawMessage(`{"hp":7}`), Revision: r.Epoch*10 + 1},
	}
}

func TestTransfer(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := enter(t, e, authKey)
	req := transferReq("tr-1", r, "default-1", "frontier", 12.5)

	a, err := e.svc.RequestTransfer(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if a.ToInstanceID != "frontier-1" || a.WS != "/maps/frontier-1/ws" {
		t.Fatalf("answer %+v", a)
	}
	t.Run("RetryGivesSameToken", func(t *testing.T) {
		again, err := e.svc.RequestTransfer(ctx, req)
		if err != nil || again.Token != a.Token {
			t.Fatalf("retry: %v, same token %v", err, again != nil && again.Token == a.Token)
		}
	})
	t.Run("SourceLostAuthority", func(t *testing.T) {
		wantCode(t, e.svc.Authorize(ctx, r.CharacterID, "default-1", r.Epoch), apierr.EFORBIDDEN)
	})
	t.Run("ErrWrongMap", func(t *testing.T) {
		_, err := e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: a.Token})
		wantCode(t, err, apierr.EWRONGMAP)
	})
	var in *mapcontract.RedeemResult
	t.Run("DestinationGetsState", func(t *testing.T) {
		in = e.redeem(t, "frontier-1", a.Token)
		if in.Kind != "transfer" || in.TransferID != "tr-1" || in.FromID != "default-1" || in.State == nil || in.State.X != 12.5 {
			t.Fatalf("redeem %+v (state %+v)", in, in.State)
		}
		if string(in.State.Attributes) != `{"hp":7}` {
			t.Fatalf("attributes %s", in.State.Attributes)
		}
	})
	t.Run("ErrTicketUsed", func(t *testing.T) {
		_, err := e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "frontier-1", Token: a.Token})
		wantCode(t, err, apierr.ETICKETUSED)
	})
	t.Run("Completed", func(t *testing.T) {
		if err := e.svc.TransferResult(ctx, mapcontract.TransferResult{TransferID: "tr-1", InstanceID: "frontier-1", Success: true}); err != nil {
			t.Fatal(err)
		}
		tr, err := e.db.Transfer(ctx, "tr-1")
		if err != nil || tr.State != orchestrator.TransferCompleted {
			t.Fatalf("transfer %+v %v, want completed", tr, err)
		}
		if err := e.svc.Authorize(ctx, r.CharacterID, "frontier-1", in.Epoch); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ErrForbiddenNotHeld", func(t *testing.T) {
		_, err := e.svc.RequestTransfer(ctx, transferReq("tr-2", r, "default-1", "cave", 1))
		wantCode(t, err, apierr.EFORBIDDEN)
	})
}

func TestTransfer_Failures(t *testing.T) {
	ctx := context.Background()
	t.Run("DestinationQuarantined", func(t *testing.T) {
		e := newEnv(t)
		r := enter(t, e, authKey)
		e.maps.set("frontier-1", orchestrator.StateQuarantined)
		_, err := e.svc.RequestTransfer(ctx, transferReq("tr-q", r, "default-1", "frontier", 1))
		wantCode(t, err, apierr.EMAPQUARANTINED)
		if err := e.svc.Authorize(ctx, r.CharacterID, "default-1", r.Epoch); err != nil {
			t.Fatalf("the character must stay in its source map: %v", err)
		}
	})
	t.Run("ExpiredGoesBackToSource", func(t *testing.T) {
		e := newEnv(t)
		r := enter(t, e, authKey)
		a, err := e.svc.RequestTransfer(ctx, transferReq("tr-x", r, "default-1", "frontier", 3))
		if err != nil {
			t.Fatal(err)
		}
		in := e.redeem(t, "frontier-1", a.Token)
		if err := e.svc.TransferResult(ctx, mapcontract.TransferResult{TransferID: "tr-x", InstanceID: "frontier-1", Success: true}); err != nil {
			t.Fatal(err)
		}
		// Now in frontier-1; a transfer to cave-1 is never redeemed.
		if _, err := e.svc.RequestTransfer(ctx, transferReq("tr-y", in, "frontier-1", "cave", 4)); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(11 * time.Second)
		if n, err := e.svc.Sweep(ctx, time.Second); err != nil || n != 1 {
			t.Fatalf("sweep aborted %d (%v), want 1", n, err)
		}
		if tr, _ := e.db.Transfer(ctx, "tr-y"); tr.State != orchestrator.TransferAborted {
			t.Fatalf("transfer %s, want aborted", tr.State)
		}
		if j := e.join(t, authKey); j.InstanceID != "frontier-1" {
			t.Fatalf("re-join goes to %s, want the healthy source frontier-1", j.InstanceID)
		}
		e.maps.set("frontier-1", orchestrator.StateUnhealthy)
		if j := e.join(t, authKey); j.InstanceID != "default-1" {
			t.Fatalf("re-join goes to %s, want the default map when the source is down", j.InstanceID)
		}
	})
	t.Run("DestinationFailed", func(t *testing.T) {
		e := newEnv(t)
		r := enter(t, e, "")
		a, err := e.svc.RequestTransfer(ctx, transferReq("tr-f", r, "default-1", "frontier", 5))
		if err != nil {
			t.Fatal(err)
		}
		in := e.redeem(t, "frontier-1", a.Token)
		if in.State == nil || in.State.X != 5 {
			t.Fatalf("a disposable character's state must travel too: %+v", in.State)
		}
		if err := e.svc.TransferResult(ctx, mapcontract.TransferResult{TransferID: "tr-f", InstanceID: "frontier-1", Reason: "spawn failed"}); err != nil {
			t.Fatal(err)
		}
		wantCode(t, e.svc.Authorize(ctx, r.CharacterID, "frontier-1", in.Epoch), apierr.EFORBIDDEN)
	})
	t.Run("LazyCreatesTemplateInstance", func(t *testing.T) {
		e := newEnv(t)
		e.maps.remove("frontier-1")
		r := enter(t, e, "")
		if _, err := e.svc.RequestTransfer(ctx, transferReq("tr-l", r, "default-1", "frontier", 1)); err != nil {
			t.Fatal(err)
		}
		if len(e.maps.created) != 1 || e.maps.created[0] != "frontier-1" {
			t.Fatalf("created %v, want frontier-1", e.maps.created)
		}
	})
	t.Run("ErrMapUnavailableUnknownMap", func(t *testing.T) {
		e := newEnv(t)
		r := enter(t, e, "")
		_, err := e.svc.RequestTransfer(ctx, transferReq("tr-u", r, "default-1", "forest", 1))
		wantCode(t, err, apierr.EMAPUNAVAILABLE)
		if len(e.maps.created) != 0 {
			t.Fatalf("created %v for a map without template", e.maps.created)
		}
	})
	t.Run("ErrBadRequest", func(t *testing.T) {
		e := newEnv(t)
		r := enter(t, e, "")
		req := transferReq("tr bad", r, "default-1", "frontier", 1)
		_, err := e.svc.RequestTransfer(ctx, req)
		wantCode(t, err, apierr.EBADREQUEST)
		_, err = e.svc.RequestTransfer(ctx, transferReq("tr-self", r, "default-1", "default", 1))
		wantCode(t, err, apierr.EBADREQUEST)
	})
	// The state a transfer hands over follows the rule of every character state
	// (record.CharacterState.Validate), for a saved character and a guest alike; a
	// refused one records nothing, so the same request with a good state goes through.
	for name, key := range map[string]string{"ErrBadRequestStateSaved": authKey, "ErrBadRequestStateGuest": ""} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			r := enter(t, e, key)
			for _, mut := range []func(*mapcontract.TransferRequest){
				func(q *mapcontract.TransferRequest) { q.State.MapID = "" },
				func(q *mapcontract.TransferRequest) { q.State.Attributes = json.RawMessage(`{"hp":`) },
			} {
				req := transferReq("tr-state", r, "default-1", "frontier", 1)
				mut(&req)
				_, err := e.svc.RequestTransfer(ctx, req)
				wantCode(t, err, apierr.EBADREQUEST)
			}
			if _, err := e.svc.RequestTransfer(ctx, transferReq("tr-state", r, "default-1", "frontier", 1)); err != nil {
				t.Fatalf("a good state after refused ones: %v", err)
			}
		})
	}
}

// TestTransfer_ToDefaultMap walks a character from the default map to frontier and back
// in a deployment whose default instance is not "default-1" (ORCH_DEFAULT_INSTANCE_ID=home):
// the portal back names only the map, and must lead to the running default instance
// rather than start a second default map.
func TestTransfer_ToDefaultMap(t *testing.T) {
	ctx := context.Background()
	e := newEnvDefault(t, "home")

	j := e.join(t, authKey)
	if j.InstanceID != "home" || j.MapID != "default" {
		t.Fatalf("join landed in %s (map %s), want home (map default)", j.InstanceID, j.MapID)
	}
	r := e.redeem(t, "home", j.Ticket)
	a, err := e.svc.RequestTransfer(ctx, transferReq("tr-out", r, "home", "frontier", 1))
	if err != nil {
		t.Fatal(err)
	}
	in := e.redeem(t, "frontier-1", a.Token)
	if err := e.svc.TransferResult(ctx, mapcontract.TransferResult{TransferID: "tr-out", InstanceID: "frontier-1", Success: true}); err != nil {
		t.Fatal(err)
	}

	back, err := e.svc.RequestTransfer(ctx, transferReq("tr-back", in, "frontier-1", "default", 2))
	if err != nil {
		t.Fatal(err)
	}
	if back.ToInstanceID != "home" || back.WS != "/maps/home/ws" {
		t.Fatalf("portal to the default map leads to %s (%s), want home", back.ToInstanceID, back.WS)
	}
	if len(e.maps.created) != 0 {
		t.Fatalf("created %v, want no new instance", e.maps.created)
	}
	if res := e.redeem(t, "home", back.Token); res.TransferID != "tr-back" {
		t.Fatalf("redeem at home %+v", res)
	}
}

// TestTransfer_Handoff: a live upgrade's handoff transfer goes to the same instance
// and is granted only while that instance hands off; the next container redeems the
// token with the exact state. A guest whose lease an orchestrator restart forgot is
// taken back from the one map that holds it, for a handoff only.
func TestTransfer_Handoff(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := enter(t, e, authKey)
	req := transferReq("tr-h", r, "default-1", "", 31.5)
	req.ToMapID, req.ToInstanceID, req.Handoff = "", "default-1", true

	_, err := e.svc.RequestTransfer(ctx, req)
	wantCode(t, err, apierr.ECONFLICT) // not handing off
	e.maps.mu.Lock()
	e.maps.handingOff = map[string]bool{"default-1": true}
	e.maps.mu.Unlock()
	other := req
	other.ToInstanceID = "frontier-1"
	_, err = e.svc.RequestTransfer(ctx, other)
	wantCode(t, err, apierr.EBADREQUEST)

	a, err := e.svc.RequestTransfer(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	in := e.redeem(t, "default-1", a.Token)
	if in.Kind != "transfer" || in.State == nil || in.State.X != 31.5 || in.Epoch <= r.Epoch {
		t.Fatalf("redeemed %+v (state %+v), want the handed-over state at a later epoch", in, in.State)
	}
	wantCode(t, e.svc.Authorize(ctx, r.CharacterID, "default-1", r.Epoch), apierr.ECONFLICT)

	t.Run("GuestForgottenByARestart", func(t *testing.T) {
		g, err := e.svc.Join(ctx, public.JoinRequest{})
		if err != nil {
			t.Fatal(err)
		}
		gr := e.redeem(t, "default-1", g.Ticket)
		e.restart(t) // the guests' leases are gone
		greq := transferReq("tr-g", gr, "default-1", "", 7)
		greq.ToMapID, greq.ToInstanceID = "", "default-1"
		if _, err := e.svc.RequestTransfer(ctx, greq); err == nil {
			t.Fatal("a plain same-instance transfer of a forgotten guest was granted")
		}
		greq.TransferID, greq.Handoff = "tr-g2", true
		ga, err := e.svc.RequestTransfer(ctx, greq)
		if err != nil {
			t.Fatalf("handoff of a forgotten guest: %v", err)
		}
		if in := e.redeem(t, "default-1", ga.Token); in.CharacterID != gr.CharacterID || in.State == nil || in.State.X != 7 {
			t.Fatalf("guest redeemed %+v", in)
		}
	})
}
