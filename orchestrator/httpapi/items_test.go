package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// joined joins a keyed player into default-1 and returns its redeemed character.
func joined(t testing.TB, s *httpapi.Server, key string) mapcontract.RedeemResult {
	t.Helper()
	var j public.JoinResponse
	testutil.PostJSON(t, s.PublicURL()+public.PathJoin, "", public.JoinRequest{AuthKey: key}, http.StatusOK, &j)
	var r mapcontract.RedeemResult
	testutil.PostJSON(t, s.ControlURL()+mapcontract.PathRedeem, as(t, "default-1"), mapcontract.RedeemRequest{InstanceID: "default-1", Token: j.Ticket}, http.StatusOK, &r)
	return r
}

var groundAt = items.Place{InstanceID: "default-1", X: 10, Y: 10}

func seedItem(id, tmpl string, q int64) items.Item {
	return items.Item{ID: id, TemplateID: tmpl, Quantity: q, Place: groundAt, State: items.StateActive}
}

// itemEvent is a critical item event from default-1 naming epochs for its characters.
func itemEvent(id string, kind items.Kind, p items.Payload, epochs map[string]int64) record.CriticalEvent {
	return record.CriticalEvent{EventID: id, InstanceID: "default-1", Kind: string(kind), MapTick: 5, Payload: p.Encode(), Epochs: epochs}
}

func wantCode(t *testing.T, e httpkit.ErrorResponse, code string) {
	t.Helper()
	if e.Error.Code != code {
		t.Fatalf("code %q (%s), want %q", e.Error.Code, e.Error.Message, code)
	}
}

// TestPersistCritical_Items checks the item path through the control route: events
// decided by the item rules, only for characters the sending map holds, and that maps
// cannot write transfer boundaries.
func TestPersistCritical_Items(t *testing.T) {
	s, _ := MustOpenServer(t)
	r := joined(t, s, "Zq3v9LrT0pXw2YbN5cHs8KdA")
	me := items.Place{CharacterID: r.CharacterID}
	url, cred := s.ControlURL(), as(t, "default-1")
	var loaded mapcontract.InstanceItemsAnswer
	testutil.PostJSON(t, url+mapcontract.PathInstanceItems, cred, mapcontract.InstanceItemsRequest{InstanceID: "default-1",
		Seed: []items.Item{seedItem("it-1", "coin", 5), seedItem("it-2", "apple", 2)}}, http.StatusOK, &loaded)
	if len(loaded.Items) != 2 {
		t.Fatalf("loaded %+v", loaded)
	}
	pickup := func(id, item string, q int64, epoch int64) record.CriticalEvent {
		return itemEvent(id, items.KindPickup, items.Payload{Move: items.Move{ItemID: item, TemplateID: map[string]string{"it-1": "coin", "it-2": "apple"}[item],
			Quantity: q, From: groundAt, To: me}}, map[string]int64{r.CharacterID: epoch})
	}
	var ack record.CriticalAck
	testutil.PostJSON(t, url+mapcontract.PathPersistCritical, cred, pickup("p-1", "it-1", 5, r.Epoch), http.StatusOK, &ack)
	var e httpkit.ErrorResponse
	t.Run("ErrForbiddenOtherMap", func(t *testing.T) {
		// frontier-1 drops the character's coin onto its own ground: a well-formed
		// event, refused because frontier-1 does not hold the character.
		ev := itemEvent("d-1", items.KindDrop, items.Payload{Move: items.Move{ItemID: "it-1", TemplateID: "coin", Quantity: 5,
			From: me, To: items.Place{InstanceID: "frontier-1", X: 1, Y: 1}}}, map[string]int64{r.CharacterID: r.Epoch})
		ev.InstanceID = "frontier-1"
		testutil.PostJSON(t, url+mapcontract.PathPersistCritical, as(t, "frontier-1"), ev, http.StatusForbidden, &e)
	})
	t.Run("ErrConflictStaleEpoch", func(t *testing.T) {
		testutil.PostJSON(t, url+mapcontract.PathPersistCritical, cred, pickup("p-3", "it-2", 2, r.Epoch+1), http.StatusConflict, &e)
		wantCode(t, e, apierr.ECONFLICT)
	})
	t.Run("RetryAnsweredAfterLeaseLost", func(t *testing.T) {
		var again record.CriticalAck
		testutil.PostJSON(t, url+mapcontract.PathPersistCritical, cred, pickup("p-1", "it-1", 5, r.Epoch-1), http.StatusOK, &again)
		if !again.Duplicate || again.Seq != ack.Seq {
			t.Fatalf("retry ack %+v, want the first %+v", again, ack)
		}
	})
	t.Run("ErrItemRuleCode", func(t *testing.T) {
		// The coin is held now: a second pickup finds it elsewhere.
		testutil.PostJSON(t, url+mapcontract.PathPersistCritical, cred, pickup("p-4", "it-1", 5, r.Epoch), http.StatusConflict, &e)
		wantCode(t, e, items.CodeWrongPlace)
		testutil.PostJSON(t, url+mapcontract.PathPersistCritical, cred, pickup("p-5", "it-2", 1, r.Epoch), http.StatusConflict, &e)
		wantCode(t, e, items.CodeQuantity)
	})
	t.Run("ErrBadRequestMalformedPayload", func(t *testing.T) {
		ev := pickup("p-6", "it-2", 2, r.Epoch)
		ev.Payload = json.RawMessage(`{"itemId":"it-2","qty":2}`)
		testutil.PostJSON(t, url+mapcontract.PathPersistCritical, cred, ev, http.StatusBadRequest, &e)
		wantCode(t, e, apierr.EBADREQUEST)
		ev.Kind = "item_grant"
		testutil.PostJSON(t, url+mapcontract.PathPersistCritical, cred, ev, http.StatusBadRequest, &e)
	})
	t.Run("ErrBadRequestTransferBoundary", func(t *testing.T) {
		boundary := record.CriticalEvent{EventID: "b-1", InstanceID: "default-1", Kind: record.EventTransferBoundary,
			Payload: json.RawMessage(`{"characterId":"` + r.CharacterID + `","mapId":"default","instanceId":"default-1","x":1,"y":1,"revision":99}`)}
		testutil.PostJSON(t, url+mapcontract.PathPersistCritical, cred, boundary, http.StatusBadRequest, &e)
	})
	t.Run("Batch", func(t *testing.T) {
		var a mapcontract.CriticalBatchAnswer
		other := pickup("p-b2", "it-2", 2, r.Epoch)
		other.InstanceID = "frontier-1"
		testutil.PostJSON(t, url+mapcontract.PathPersistCriticalBatch, cred, mapcontract.CriticalBatch{InstanceID: "default-1", Events: []record.CriticalEvent{
			pickup("p-b1", "it-1", 5, r.Epoch), // held already: refused alone
			other,                              // another instance's: refused alone
			pickup("p-1", "it-1", 5, r.Epoch),  // a retry: its first ack
		}}, http.StatusOK, &a)
		if len(a.Results) != 3 || a.Results[0].Error == nil || a.Results[0].Error.Code != items.CodeWrongPlace ||
			a.Results[1].Error == nil || a.Results[1].Error.Code != apierr.EFORBIDDEN ||
			a.Results[2].Ack == nil || a.Results[2].Ack.Seq != ack.Seq || !a.Results[2].Ack.Duplicate {
			t.Fatalf("results %+v", a.Results)
		}
		testutil.PostJSON(t, url+mapcontract.PathPersistCriticalBatch, cred, mapcontract.CriticalBatch{InstanceID: "default-1"}, http.StatusBadRequest, &e)
		testutil.PostJSON(t, url+mapcontract.PathPersistCriticalBatch, cred, mapcontract.CriticalBatch{InstanceID: "default-1",
			Events: []record.CriticalEvent{pickup("p-1", "it-1", 5, r.Epoch), pickup("p-1", "it-1", 5, r.Epoch)}}, http.StatusBadRequest, &e)
		testutil.PostJSON(t, url+mapcontract.PathPersistCriticalBatch, as(t, "frontier-1"), mapcontract.CriticalBatch{InstanceID: "default-1",
			Events: []record.CriticalEvent{pickup("p-b3", "it-2", 2, r.Epoch)}}, http.StatusForbidden, &e)
	})
	var held mapcontract.CharacterItemsAnswer
	testutil.PostJSON(t, url+mapcontract.PathCharacterItems, cred, mapcontract.CharacterItemsRequest{InstanceID: "default-1", CharacterID: r.CharacterID, Epoch: r.Epoch}, http.StatusOK, &held)
	if len(held.Items) != 1 || held.Items[0].ID != "it-1" || held.Items[0].Quantity != 5 || held.Items[0].SinceTick != 5 {
		t.Fatalf("held %+v, want it-1 only", held.Items)
	}
	testutil.PostJSON(t, url+mapcontract.PathCharacterItems, as(t, "frontier-1"), mapcontract.CharacterItemsRequest{InstanceID: "frontier-1", CharacterID: r.CharacterID, Epoch: r.Epoch}, http.StatusForbidden, &e)
}

// TestInstanceItems checks the map's start-up load: seeding is idempotent, a restarted
// map seeding the same ids gets the stored state back (nothing duplicated), and a bad
// seed is refused whole with a clear code.
func TestInstanceItems(t *testing.T) {
	s, _ := MustOpenServer(t)
	r := joined(t, s, "Zq3v9LrT0pXw2YbN5cHs8KdA")
	url, cred := s.ControlURL(), as(t, "default-1")
	seed := []items.Item{seedItem("apple-1", "apple", 1), seedItem("apple-2", "apple", 1)}
	testutil.PostJSON(t, url+mapcontract.PathInstanceItems, cred, mapcontract.InstanceItemsRequest{InstanceID: "default-1", Seed: seed}, http.StatusOK, nil)
	ev := itemEvent("p-1", items.KindPickup, items.Payload{Move: items.Move{ItemID: "apple-1", TemplateID: "apple", Quantity: 1,
		From: groundAt, To: items.Place{CharacterID: r.CharacterID}}}, map[string]int64{r.CharacterID: r.Epoch})
	testutil.PostJSON(t, url+mapcontract.PathPersistCritical, cred, ev, http.StatusOK, nil)

	// The "restarted" map seeds the same generated items again.
	var a mapcontract.InstanceItemsAnswer
	testutil.PostJSON(t, url+mapcontract.PathInstanceItems, cred, mapcontract.InstanceItemsRequest{InstanceID: "default-1", Seed: seed}, http.StatusOK, &a)
	var got []string
	for _, it := range a.Items {
		got = append(got, it.ID+"@"+it.Place.String())
	}
	if want := "apple-1@character:" + r.CharacterID + " apple-2@world:default-1@10,10"; strings.Join(got, " ") != want {
		t.Fatalf("items %v, want %s", got, want)
	}
	var e httpkit.ErrorResponse
	for _, tc := range []struct {
		name   string
		seed   []items.Item
		status int
		code   string
	}{
		{"ErrCriticalSeed", []items.Item{seedItem("c", "crown", 1)}, http.StatusConflict, items.CodeCriticalSeed},
		{"ErrOtherInstance", []items.Item{{ID: "x", TemplateID: "apple", Quantity: 1, Place: items.Place{InstanceID: "frontier-1"}, State: items.StateActive}}, http.StatusConflict, items.CodeIllegalMove},
		{"ErrUnknownTemplate", []items.Item{seedItem("x", "lamp", 1)}, http.StatusConflict, items.CodeUnknownTemplate},
		{"ErrTwice", []items.Item{seedItem("x", "apple", 1), seedItem("x", "apple", 1)}, http.StatusBadRequest, apierr.EBADREQUEST},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testutil.PostJSON(t, url+mapcontract.PathInstanceItems, cred, mapcontract.InstanceItemsRequest{InstanceID: "default-1", Seed: tc.seed}, tc.status, &e)
			wantCode(t, e, tc.code)
		})
	}
	t.Run("ErrForbiddenActingForAnother", func(t *testing.T) {
		testutil.PostJSON(t, url+mapcontract.PathInstanceItems, as(t, "frontier-1"), mapcontract.InstanceItemsRequest{InstanceID: "default-1"}, http.StatusForbidden, nil)
	})
	t.Run("Client", func(t *testing.T) {
		ctx := context.Background()
		cl := mapcontract.NewClient(url, cred)
		a, err := cl.InstanceItems(ctx, mapcontract.InstanceItemsRequest{InstanceID: "default-1", Seed: seed})
		if err != nil || len(a.Items) != 2 {
			t.Fatalf("instance items %+v %v", a, err)
		}
		held, err := cl.CharacterItems(ctx, mapcontract.CharacterItemsRequest{InstanceID: "default-1", CharacterID: r.CharacterID, Epoch: r.Epoch})
		if err != nil || len(held.Items) != 1 || held.Items[0].ID != "apple-1" {
			t.Fatalf("character items %+v %v", held, err)
		}
		if pols, err := cl.ItemPolicies(ctx, mapcontract.ItemPoliciesRequest{InstanceID: "default-1"}); err != nil || len(pols.Policies) != 0 {
			t.Fatalf("policies %+v %v", pols, err)
		}
		_, err = cl.InstanceItems(ctx, mapcontract.InstanceItemsRequest{InstanceID: "default-1", Seed: []items.Item{seedItem("c", "crown", 1)}})
		if apierr.Code(err) != items.CodeCriticalSeed {
			t.Fatalf("err %v, want %s through the client", err, items.CodeCriticalSeed)
		}
	})
}

// TestAdminItemPolicies checks the operators' policy API: root secret only, strict
// validation with messages that say what is wrong, created vs replaced, and maps
// loading the policies anchored in their instance.
func TestAdminItemPolicies(t *testing.T) {
	s, _ := MustOpenServer(t)
	url := s.ControlURL() + httpapi.PathAdminItemPolicies
	crown := items.Policy{TemplateID: "crown", Type: items.RegenerativeUnique, CooldownTicks: 300,
		Anchors: []items.Place{{InstanceID: "default-1", X: 100, Y: 100}}}
	var got items.Policy
	testutil.Do(t, http.MethodPut, url+"/crown", secret, crown, http.StatusCreated, &got)
	if got.ItemID != "crown" || got.CooldownTicks != 300 {
		t.Fatalf("put answered %+v", got)
	}
	crown.CooldownTicks = 600
	testutil.Do(t, http.MethodPut, url+"/crown", secret, crown, http.StatusOK, &got)
	testutil.Do(t, http.MethodGet, url+"/crown", secret, nil, http.StatusOK, &got)
	if got.CooldownTicks != 600 {
		t.Fatalf("get answered %+v", got)
	}
	var list struct{ Policies []items.Policy }
	testutil.Do(t, http.MethodGet, url, secret, nil, http.StatusOK, &list)
	if len(list.Policies) != 1 {
		t.Fatalf("list %+v", list)
	}
	var mine mapcontract.ItemPoliciesAnswer
	testutil.PostJSON(t, s.ControlURL()+mapcontract.PathItemPolicies, as(t, "default-1"), mapcontract.ItemPoliciesRequest{InstanceID: "default-1"}, http.StatusOK, &mine)
	testutil.PostJSON(t, s.ControlURL()+mapcontract.PathItemPolicies, as(t, "frontier-1"), mapcontract.ItemPoliciesRequest{InstanceID: "frontier-1"}, http.StatusOK, &list)
	if len(mine.Policies) != 1 || len(list.Policies) != 0 {
		t.Fatalf("default-1 got %+v, frontier-1 got %+v", mine.Policies, list.Policies)
	}

	var e httpkit.ErrorResponse
	for _, tc := range []struct {
		name, path string
		body       any
		message    string
	}{
		{"UnknownField", "/crown", `{"templateId":"crown","policyType":"instance_quota","anchorLocations":[],"cooldown":5}`, "unknown field"},
		{"NotJSON", "/crown", `{`, "invalid JSON"},
		{"BadType", "/crown", `{"templateId":"crown","policyType":"forever","anchorLocations":[{"instanceId":"default-1"}]}`, "policyType"},
		{"NotCritical", "/sword", `{"templateId":"sword","policyType":"instance_quota","anchorLocations":[{"instanceId":"default-1"}]}`, "not a critical item"},
		{"NoAnchors", "/crown", `{"templateId":"crown","policyType":"unique_persistent","anchorLocations":[]}`, "anchorLocations"},
		{"PathMismatch", "/crown", `{"itemId":"ember","templateId":"crown","policyType":"unique_persistent","anchorLocations":[{"instanceId":"default-1"}]}`, "differs"},
		{"NegativeCooldown", "/crown", `{"templateId":"crown","policyType":"regenerative_unique","cooldownTicks":-1,"anchorLocations":[{"instanceId":"default-1"}]}`, "cooldownTicks"},
	} {
		t.Run("ErrBadRequest"+tc.name, func(t *testing.T) {
			testutil.Do(t, http.MethodPut, url+tc.path, secret, tc.body, http.StatusBadRequest, &e)
			if e.Error.Code != apierr.EBADREQUEST || !strings.Contains(e.Error.Message, tc.message) {
				t.Fatalf("error %+v, want bad_request mentioning %q", e.Error, tc.message)
			}
		})
	}
	t.Run("ErrUnauthorized", func(t *testing.T) {
		testutil.Do(t, http.MethodGet, url, as(t, "default-1"), nil, http.StatusUnauthorized, nil)
		testutil.Do(t, http.MethodPut, url+"/crown", "", crown, http.StatusUnauthorized, nil)
	})
	testutil.Do(t, http.MethodDelete, url+"/crown", secret, nil, http.StatusNoContent, nil)
	testutil.Do(t, http.MethodDelete, url+"/crown", secret, nil, http.StatusNotFound, &e)
	testutil.Do(t, http.MethodGet, url+"/crown", secret, nil, http.StatusNotFound, &e)
	var recs struct{ Recoveries []orchestrator.ItemRecovery }
	testutil.Do(t, http.MethodGet, s.ControlURL()+httpapi.PathAdminItemRecoveries+"?itemId=crown", secret, nil, http.StatusOK, &recs)
	testutil.Do(t, http.MethodGet, s.ControlURL()+httpapi.PathAdminItemRecoveries+"?limit=x", secret, nil, http.StatusBadRequest, nil)
}
