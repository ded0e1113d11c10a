package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// onlyCurrent is a Callers that knows one current container per instance, of
// generation "t1".
type onlyCurrent struct{}

func (onlyCurrent) InstanceOf(id keys.Identity) (string, bool) {
	return id.InstanceID, id.Generation == "t1"
}

func (onlyCurrent) Adopted() bool { return true }

// handedOut is onlyCurrent where the warm-pool container pool-aa was handed frontier-1.
type handedOut struct{ onlyCurrent }

func (h handedOut) InstanceOf(id keys.Identity) (string, bool) {
	if id.InstanceID == "pool-aa" {
		return "frontier-1", id.Generation == "t1"
	}
	return h.onlyCurrent.InstanceOf(id)
}

// TestMapCredentials_HandedOutPoolBeat: a warm-pool container handed an instance may
// beat once more under its pool id before it takes the instance's name; that beat is
// answered registered, not refused, and it still acts for no other instance.
func TestMapCredentials_HandedOutPoolBeat(t *testing.T) {
	s, _ := MustOpenServer(t, func(s *httpapi.Server) { s.Callers = handedOut{} })
	cred := as(t, "pool-aa")
	var a mapcontract.HeartbeatAnswer
	testutil.PostJSON(t, s.ControlURL()+mapcontract.PathMapHeartbeat, cred, mapcontract.Heartbeat{InstanceID: "pool-aa"}, http.StatusOK, &a)
	if !a.Registered {
		t.Fatalf("the pool id's last beat: %+v, want registered", a)
	}
	var e httpkit.ErrorResponse
	testutil.PostJSON(t, s.ControlURL()+mapcontract.PathMapHeartbeat, cred, mapcontract.Heartbeat{InstanceID: "default-1"}, http.StatusForbidden, &e)
	if e.Error.Code != apierr.EFORBIDDEN {
		t.Fatalf("a beat for another instance: %+v", e.Error)
	}
}

// TestMapCredentials checks the control listener's map routes: each demands a map
// credential of this orchestrator for a current container, and acts only for the
// instance that credential names.
func TestMapCredentials(t *testing.T) {
	s, _ := MustOpenServer(t, func(s *httpapi.Server) { s.Callers = onlyCurrent{} })
	url := s.ControlURL()
	b := as(t, "frontier-1") // a map acting for default-1 below

	oldGen, err := testutil.Root(t, secret).MapCredential(keys.Identity{InstanceID: "default-1", Generation: "t0"})
	if err != nil {
		t.Fatal(err)
	}
	otherRoot, _ := keys.NewRoot(secret + "-other")
	forged, _ := otherRoot.MapCredential(keys.Identity{InstanceID: "default-1", Generation: "t1"})

	for _, tt := range []struct {
		name, path, cred string
		body             any
		status           int
		code             string
	}{
		{"ErrUnauthorizedNoCredential", mapcontract.PathMapHeartbeat, "", mapcontract.Heartbeat{InstanceID: "default-1"}, http.StatusUnauthorized, apierr.EUNAUTHORIZED},
		{"ErrUnauthorizedRootIsNoMapCredential", mapcontract.PathMapHeartbeat, secret, mapcontract.Heartbeat{InstanceID: "default-1"}, http.StatusUnauthorized, apierr.EUNAUTHORIZED},
		{"ErrUnauthorizedForged", mapcontract.PathMapHeartbeat, forged, mapcontract.Heartbeat{InstanceID: "default-1"}, http.StatusUnauthorized, apierr.EUNAUTHORIZED},
		{"ErrForbiddenReplacedContainer", mapcontract.PathMapHeartbeat, oldGen, mapcontract.Heartbeat{InstanceID: "default-1"}, http.StatusForbidden, apierr.EFORBIDDEN},
		{"ErrForbiddenRegisterAsAnother", mapcontract.PathMapReady, b, mapcontract.MapReady{InstanceID: "default-1", MapID: "default", GamePort: 1, ControlPort: 2}, http.StatusForbidden, apierr.EFORBIDDEN},
		{"ErrForbiddenHeartbeatAsAnother", mapcontract.PathMapHeartbeat, b, mapcontract.Heartbeat{InstanceID: "default-1"}, http.StatusForbidden, apierr.EFORBIDDEN},
		{"ErrForbiddenRedeemForAnother", mapcontract.PathRedeem, b, mapcontract.RedeemRequest{InstanceID: "default-1", Token: "mt1.x"}, http.StatusForbidden, apierr.EFORBIDDEN},
		{"ErrForbiddenTransferFromAnother", mapcontract.PathRequestTransfer, b, mapcontract.TransferRequest{TransferID: "tr-1", CharacterID: "c", FromInstanceID: "default-1", ToInstanceID: "frontier-1"}, http.StatusForbidden, apierr.EFORBIDDEN},
		{"ErrForbiddenResultForAnother", mapcontract.PathTransferResult, b, mapcontract.TransferResult{TransferID: "tr-1", InstanceID: "default-1", Success: true}, http.StatusForbidden, apierr.EFORBIDDEN},
		{"ErrUnauthorizedAdminWithMapCredential", httpapi.PathAdminMaps, as(t, "default-1"), orchestrator.CreateInstance{InstanceID: "x-1", MapID: "x"}, http.StatusUnauthorized, apierr.EUNAUTHORIZED},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var e httpkit.ErrorResponse
			testutil.PostJSON(t, url+tt.path, tt.cred, tt.body, tt.status, &e)
			if e.Error.Code != tt.code {
				t.Fatalf("code %q, want %q", e.Error.Code, tt.code)
			}
		})
	}
}
