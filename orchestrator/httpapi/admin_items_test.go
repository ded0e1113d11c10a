package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestAdminItems checks the operators' item lookup: who holds an item, where it is and
// the last critical event that changed it, the items a character holds, and the
// structured errors of an unknown item, an unknown character and a bad query, behind
// the root secret like every admin route.
func TestAdminItems(t *testing.T) {
	s, _ := MustOpenServer(t)
	r := joined(t, s, "Zq3v9LrT0pXw2YbN5cHs8KdA")
	me := items.Place{CharacterID: r.CharacterID}
	url, cred := s.ControlURL(), as(t, "default-1")
	testutil.PostJSON(t, url+mapcontract.PathInstanceItems, cred, mapcontract.InstanceItemsRequest{InstanceID: "default-1",
		Seed: []items.Item{seedItem("it-1", "coin", 5), seedItem("it-2", "apple", 2), seedItem("it-3", "apple", 1)}}, http.StatusOK, nil)
	move := func(id string, kind items.Kind, item, tmpl string, q int64, from, to items.Place) {
		t.Helper()
		testutil.PostJSON(t, url+mapcontract.PathPersistCritical, cred, itemEvent(id, kind, items.Payload{Move: items.Move{
			ItemID: item, TemplateID: tmpl, Quantity: q, From: from, To: to}}, map[string]int64{r.CharacterID: r.Epoch}), http.StatusOK, nil)
	}
	move("p-1", items.KindPickup, "it-1", "coin", 5, groundAt, me)
	move("p-3", items.KindPickup, "it-3", "apple", 1, groundAt, me)
	elsewhere := items.Place{InstanceID: "default-1", X: 40, Y: 50}
	move("d-3", items.KindDrop, "it-3", "apple", 1, me, elsewhere)

	get := func(path string, status int, out any) {
		t.Helper()
		testutil.Do(t, http.MethodGet, url+httpapi.PathAdminItems+path, secret, nil, status, out)
	}
	t.Run("HeldByACharacter", func(t *testing.T) {
		var rec orchestrator.ItemRecord
		get("/it-1", http.StatusOK, &rec)
		if rec.ID != "it-1" || rec.Holder != r.CharacterID || rec.Place != me || rec.State != items.StateActive || rec.Quantity != 5 {
			t.Fatalf("it-1 %+v, want held by %s", rec, r.CharacterID)
		}
		if e := rec.LastEvent; e == nil || e.EventID != "p-1" || e.Kind != string(items.KindPickup) || e.InstanceID != "default-1" ||
			e.MapTick != 5 || e.CommittedAt.IsZero() {
			t.Fatalf("it-1 last event %+v, want the pickup p-1", rec.LastEvent)
		}
	})
	t.Run("LyingWhereItWasDropped", func(t *testing.T) {
		var rec orchestrator.ItemRecord
		get("/it-3", http.StatusOK, &rec)
		if rec.Holder != "" || rec.Place != elsewhere || rec.LastEvent == nil || rec.LastEvent.EventID != "d-3" {
			t.Fatalf("it-3 %+v (last event %+v), want lying at %v since the drop d-3", rec, rec.LastEvent, elsewhere)
		}
	})
	t.Run("OnlySeeded", func(t *testing.T) {
		var rec orchestrator.ItemRecord
		get("/it-2", http.StatusOK, &rec)
		if rec.Holder != "" || rec.Place != groundAt || rec.LastEvent != nil {
			t.Fatalf("it-2 %+v, want on the ground with no event", rec)
		}
	})
	t.Run("ByHolder", func(t *testing.T) {
		var list struct{ Items []orchestrator.ItemRecord }
		get("?holder="+r.CharacterID, http.StatusOK, &list)
		if len(list.Items) != 1 || list.Items[0].ID != "it-1" || list.Items[0].LastEvent == nil {
			t.Fatalf("items held by %s: %+v, want it-1 only", r.CharacterID, list.Items)
		}
	})

	var e httpkit.ErrorResponse
	for _, tc := range []struct {
		name, path string
		status     int
		code       string
	}{
		{"ErrItemNotFound", "/no-such-item", http.StatusNotFound, apierr.EITEMNOTFOUND},
		{"ErrNotFoundHolder", "?holder=nobody-1", http.StatusNotFound, apierr.ENOTFOUND},
		{"ErrBadRequestNoHolder", "", http.StatusBadRequest, apierr.EBADREQUEST},
		{"ErrBadRequestEmptyHolder", "?holder=", http.StatusBadRequest, apierr.EBADREQUEST},
		{"ErrBadRequestTwoHolders", "?holder=a&holder=b", http.StatusBadRequest, apierr.EBADREQUEST},
		{"ErrBadRequestUnknownParameter", "?holder=" + r.CharacterID + "&state=active", http.StatusBadRequest, apierr.EBADREQUEST},
		{"ErrBadRequestBadHolder", "?holder=two%20words", http.StatusBadRequest, apierr.EBADREQUEST},
		{"ErrBadRequestBadItemID", "/two%20words", http.StatusBadRequest, apierr.EBADREQUEST},
	} {
		t.Run(tc.name, func(t *testing.T) {
			get(tc.path, tc.status, &e)
			wantCode(t, e, tc.code)
		})
	}
	t.Run("ErrUnauthorized", func(t *testing.T) {
		testutil.Do(t, http.MethodGet, url+httpapi.PathAdminItems+"/it-1", "", nil, http.StatusUnauthorized, nil)
		testutil.Do(t, http.MethodGet, url+httpapi.PathAdminItems+"?holder="+r.CharacterID, cred, nil, http.StatusUnauthorized, nil)
	})
	t.Run("NotOnThePublicListener", func(t *testing.T) {
		testutil.Do(t, http.MethodGet, s.PublicURL()+httpapi.PathAdminItems+"/it-1", secret, nil, http.StatusNotFound, nil)
	})
	if got := apierr.Status(items.CodeNotFound); got != http.StatusNotFound || items.CodeNotFound != apierr.EITEMNOTFOUND {
		t.Fatalf("items.CodeNotFound %q answers %d, want apierr.EITEMNOTFOUND and 404", items.CodeNotFound, got)
	}
}
