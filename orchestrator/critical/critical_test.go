package critical_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/critical"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
)

// leases is a hand-written fake of the admission service's leases: character ->
// lease.
type leases map[string]orchestrator.Lease

var _ critical.Leases = leases(nil)

func (l leases) Lease(_ context.Context, id string) (orchestrator.Lease, error) {
	return l[id], nil
}

func (l leases) Authorize(_ context.Context, id, instanceID string, epoch int64) error {
	switch le := l[id]; {
	case le.InstanceID != instanceID:
		return apierr.Errorf(apierr.EFORBIDDEN, "not held")
	case le.Epoch != epoch:
		return apierr.Errorf(apierr.ECONFLICT, "stale epoch")
	}
	return nil
}

// mustService opens a real SQLite store with characters alice (held by i1 at epoch 3),
// bob (held by i2) and carol (in no map), and a crown policy anchored in i1.
func mustService(t *testing.T) (*critical.Service, *sqlite.DB) {
	t.Helper()
	db := sqlite.NewDB(filepath.Join(t.TempDir(), "mapyard.db"))
	if err := db.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	for _, id := range []string{"alice", "bob", "carol"} {
		if err := db.CreateCharacter(ctx, &orchestrator.Character{ID: id, KeyHash: "h-" + id, Name: id}, 0); err != nil {
			t.Fatal(err)
		}
	}
	s := critical.NewService(db, leases{
		"alice": {CharacterID: "alice", InstanceID: "i1", Epoch: 3},
		"bob":   {CharacterID: "bob", InstanceID: "i2", Epoch: 1},
	})
	if _, _, err := s.PutPolicy(ctx, "crown", items.Policy{TemplateID: "crown", Type: items.UniquePersistent,
		Anchors: []items.Place{anchor}, OwnershipTimeoutTicks: 10}); err != nil {
		t.Fatal(err)
	}
	return s, db
}

var (
	ground = items.Place{InstanceID: "i1", X: 5, Y: 5}
	anchor = items.Place{InstanceID: "i1", X: 50, Y: 50}
	alice  = items.Place{CharacterID: "alice"}
	carol  = items.Place{CharacterID: "carol"}
)

func event(id string, kind items.Kind, tick int64, p items.Payload, epochs map[string]int64) record.CriticalEvent {
	return record.CriticalEvent{EventID: id, InstanceID: "i1", Kind: string(kind), MapTick: tick, Payload: p.Encode(), Epochs: epochs}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := apierr.Code(err); got != code {
		t.Fatalf("code %q (%v), want %q", got, err, code)
	}
}

func TestPrepare(t *testing.T) {
	cat := items.DefaultCatalog()
	big := fmt.Sprintf(`{"x":"%0*d"}`, record.MaxCriticalPayloadBytes, 0)
	ok := record.CriticalEvent{EventID: "e", InstanceID: "i1", Kind: "quest_flag", Payload: json.RawMessage(`{ "a" : 1 }`)}
	c, iev, err := critical.Prepare(cat, ok)
	if err != nil || iev != nil || c.Items != nil || string(c.Event.Payload) != `{"a":1}` {
		t.Fatalf("commit %+v item event %v err %v", c, iev, err)
	}
	for _, tc := range []struct {
		name string
		mut  func(ev *record.CriticalEvent)
		code string
	}{
		{"ErrNoEventID", func(ev *record.CriticalEvent) { ev.EventID = "" }, apierr.EBADREQUEST},
		{"ErrEventIDWithSpace", func(ev *record.CriticalEvent) { ev.EventID = "a b" }, apierr.EBADREQUEST},
		{"ErrNoInstance", func(ev *record.CriticalEvent) { ev.InstanceID = "" }, apierr.EBADREQUEST},
		{"ErrNoKind", func(ev *record.CriticalEvent) { ev.Kind = "" }, apierr.EBADREQUEST},
		{"ErrLongKind", func(ev *record.CriticalEvent) { ev.Kind = strings.Repeat("k", 65) }, apierr.EBADREQUEST},
		{"ErrNegativeTick", func(ev *record.CriticalEvent) { ev.MapTick = -1 }, apierr.EBADREQUEST},
		{"ErrMalformedPayload", func(ev *record.CriticalEvent) { ev.Payload = json.RawMessage(`{"a":`) }, apierr.EBADREQUEST},
		{"ErrPayloadNotObject", func(ev *record.CriticalEvent) { ev.Payload = json.RawMessage(`"s"`) }, apierr.EBADREQUEST},
		{"ErrTooLarge", func(ev *record.CriticalEvent) { ev.Payload = json.RawMessage(big) }, apierr.ETOOLARGE},
		{"ErrRetiredItemKind", func(ev *record.CriticalEvent) { ev.Kind = "item_grant" }, apierr.EBADREQUEST},
		{"ErrItemUnknownField", func(ev *record.CriticalEvent) {
			ev.Kind, ev.Payload = "item_pickup", json.RawMessage(`{"itemId":"x","templateId":"coin","quantity":1,"qty":2}`)
		}, apierr.EBADREQUEST},
		{"ErrItemIllegalMove", func(ev *record.CriticalEvent) {
			ev.Kind = "item_drop"
			ev.Payload = items.Payload{Move: items.Move{ItemID: "x", TemplateID: "coin", Quantity: 1, From: ground, To: alice}}.Encode()
		}, items.CodeIllegalMove},
		{"ErrTransferBoundary", func(ev *record.CriticalEvent) {
			ev.Kind, ev.Payload = record.EventTransferBoundary, json.RawMessage(`{"characterId":"alice","mapId":"m","instanceId":"i","revision":2}`)
		}, apierr.EBADREQUEST},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := ok
			tc.mut(&ev)
			_, _, err := critical.Prepare(cat, ev)
			wantCode(t, err, tc.code)
		})
	}
}

func TestService_Commit(t *testing.T) {
	ctx := context.Background()
	pickup := func(id, item string, to items.Place, epochs map[string]int64) record.CriticalEvent {
		return event(id, items.KindPickup, 2, items.Payload{Move: items.Move{ItemID: item, TemplateID: "coin", Quantity: 1, From: ground, To: to}}, epochs)
	}
	seed := func(t *testing.T, s *critical.Service, ids ...string) {
		var list []items.Item
		for _, id := range ids {
			list = append(list, items.Item{ID: id, TemplateID: "coin", Quantity: 1, Place: ground, State: items.StateActive})
		}
		if _, err := s.InstanceItems(ctx, mapcontract.InstanceItemsRequest{InstanceID: "i1", Seed: list}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("LeaseHolderPicksUp", func(t *testing.T) {
		s, _ := mustService(t)
		seed(t, s, "c1")
		if _, err := s.Commit(ctx, pickup("p1", "c1", alice, map[string]int64{"alice": 3})); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ErrForbiddenNotHeld", func(t *testing.T) {
		s, db := mustService(t)
		seed(t, s, "c1")
		_, err := s.Commit(ctx, pickup("p1", "c1", carol, map[string]int64{"carol": 0}))
		wantCode(t, err, apierr.EFORBIDDEN)
		if _, err := db.CriticalEvent(ctx, "p1"); apierr.Code(err) != apierr.ENOTFOUND {
			t.Fatal("refused event recorded")
		}
	})
	t.Run("ErrConflictStaleEpoch", func(t *testing.T) {
		s, _ := mustService(t)
		seed(t, s, "c1")
		_, err := s.Commit(ctx, pickup("p1", "c1", alice, map[string]int64{"alice": 2}))
		wantCode(t, err, apierr.ECONFLICT)
	})
	t.Run("ErrBadRequestTransferBoundary", func(t *testing.T) {
		s, _ := mustService(t)
		_, err := s.Commit(ctx, record.CriticalEvent{EventID: "b", InstanceID: "i1", Kind: record.EventTransferBoundary, Payload: json.RawMessage(`{}`)})
		wantCode(t, err, apierr.EBADREQUEST)
	})
	t.Run("RecoveryFromInactiveHolder", func(t *testing.T) {
		s, db := mustService(t)
		// The crown has been carol's since tick 0; carol is in no map.
		if err := db.SeedItems(ctx, func(items.Ledger) ([]items.Item, error) {
			return []items.Item{{ID: "crown", TemplateID: "crown", Quantity: 1, Place: carol, State: items.StateActive}}, nil
		}); err != nil {
			t.Fatal(err)
		}
		rec := func(id string, tick int64, from items.Place) record.CriticalEvent {
			return event(id, items.KindRecover, tick, items.Payload{Trigger: items.TriggerOwnershipTimeout,
				Move: items.Move{ItemID: "crown", TemplateID: "crown", Quantity: 1, From: from, To: anchor}}, nil)
		}
		_, err := s.Commit(ctx, rec("r0", 9, carol))
		wantCode(t, err, items.CodeNotRecoverable)
		if _, err := s.Commit(ctx, rec("r1", 10, carol)); err != nil {
			t.Fatal(err)
		}
		recs, err := s.Recoveries(ctx, "crown", 0)
		if err != nil || len(recs) != 1 || recs[0].From != carol || recs[0].To != anchor {
			t.Fatalf("recoveries %+v %v", recs, err)
		}
	})
	t.Run("ErrHolderActiveElsewhere", func(t *testing.T) {
		s, db := mustService(t)
		bob := items.Place{CharacterID: "bob"}
		if err := db.SeedItems(ctx, func(items.Ledger) ([]items.Item, error) {
			return []items.Item{{ID: "crown", TemplateID: "crown", Quantity: 1, Place: bob, State: items.StateActive}}, nil
		}); err != nil {
			t.Fatal(err)
		}
		_, err := s.Commit(ctx, event("r1", items.KindRecover, 100, items.Payload{Trigger: items.TriggerOwnershipTimeout,
			Move: items.Move{ItemID: "crown", TemplateID: "crown", Quantity: 1, From: bob, To: anchor}}, nil))
		wantCode(t, err, items.CodeHolderActive)
	})
}

func TestService_InstanceItems(t *testing.T) {
	ctx := context.Background()
	s, _ := mustService(t)
	_, err := s.InstanceItems(ctx, mapcontract.InstanceItemsRequest{InstanceID: "i1", Seed: make([]items.Item, mapcontract.MaxSeedItems+1)})
	wantCode(t, err, apierr.ETOOLARGE)
	_, err = s.InstanceItems(ctx, mapcontract.InstanceItemsRequest{InstanceID: ""})
	wantCode(t, err, apierr.EBADREQUEST)
	a, err := s.InstanceItems(ctx, mapcontract.InstanceItemsRequest{InstanceID: "i1"})
	if err != nil || len(a.Items) != 0 || len(a.Policies) != 1 || a.Policies[0].ItemID != "crown" {
		t.Fatalf("answer %+v %v: want the crown policy, no items", a, err)
	}
	other, err := s.InstancePolicies(ctx, mapcontract.ItemPoliciesRequest{InstanceID: "i9"})
	if err != nil || len(other.Policies) != 0 {
		t.Fatalf("i9 policies %+v %v", other, err)
	}
	_, err = s.CharacterItems(ctx, mapcontract.CharacterItemsRequest{InstanceID: "i1", CharacterID: "bob", Epoch: 1})
	wantCode(t, err, apierr.EFORBIDDEN)
}
