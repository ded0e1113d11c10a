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
// mustSeed lays coins of the ids on the ground of instance i1.
func mustSeed(t *testing.T, s *critical.Service, ids ...string) {
	t.Helper()
	var list []items.Item
	for _, id := range ids {
		list = append(list, items.Item{ID: id, TemplateID: "coin", Quantity: 1, Place: ground, State: items.StateActive})
	}
	if _, err := s.InstanceItems(context.Background(), mapcontract.InstanceItemsRequest{InstanceID: "i1", Seed: list}); err != nil {
		t.Fatal(err)
	}
}

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
	t.Run("LeaseHolderPicksUp", func(t *testing.T) {
		s, _ := mustService(t)
		mustSeed(t, s, "c1")
		if _, err := s.Commit(ctx, pickup("p1", "c1", alice, map[string]int64{"alice": 3})); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ErrForbiddenNotHeld", func(t *testing.T) {
		s, db := mustService(t)
		mustSeed(t, s, "c1")
		_, err := s.Commit(ctx, pickup("p1", "c1", carol, map[string]int64{"carol": 0}))
		wantCode(t, err, apierr.EFORBIDDEN)
		if _, err := db.CriticalEvent(ctx, "p1"); apierr.Code(err) != apierr.ENOTFOUND {
			t.Fatal("refused event recorded")
		}
	})
	t.Run("ErrConflictStaleEpoch", func(t *testing.T) {
		s, _ := mustService(t)
		mustSeed(t, s, "c1")
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

// countedLeases counts the lease checks it passes on.
type countedLeases struct {
	critical.Leases
	authorized int
}

func (l *countedLeases) Authorize(ctx context.Context, id, instanceID string, epoch int64) error {
	l.authorized++
	return l.Leases.Authorize(ctx, id, instanceID, epoch)
}

func TestService_CommitBatch(t *testing.T) {
	ctx := context.Background()
	move := func(id string, kind items.Kind, item string, from, to items.Place, epoch int64) record.CriticalEvent {
		return event(id, kind, 2, items.Payload{Move: items.Move{ItemID: item, TemplateID: "coin", Quantity: 1, From: from, To: to}},
			map[string]int64{"alice": epoch})
	}
	t.Run("InOrderInOneCommit", func(t *testing.T) {
		s, db := mustService(t)
		leases := &countedLeases{Leases: s.Leases}
		s.Leases = leases
		mustSeed(t, s, "c1", "c2")
		before := db.Stats()
		// A pickup and the drop of the same coin in one tick: applied in the batch's
		// order, the drop finds the coin where the pickup put it.
		a, err := s.CommitBatch(ctx, mapcontract.CriticalBatch{InstanceID: "i1", Events: []record.CriticalEvent{
			move("p1", items.KindPickup, "c1", ground, alice, 3),
			move("d1", items.KindDrop, "c1", alice, ground, 3),
			move("p2", items.KindPickup, "c2", ground, alice, 3),
		}})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range a.Results {
			if r.Error != nil || r.Ack == nil {
				t.Fatalf("result %d: %+v", i, r)
			}
		}
		if st := db.Stats(); st.CriticalCommits-before.CriticalCommits != 1 {
			t.Fatalf("%d commits, want 1", st.CriticalCommits-before.CriticalCommits)
		}
		if leases.authorized != 1 {
			t.Fatalf("alice's lease checked %d times, want once for the batch", leases.authorized)
		}
		held, err := db.CharacterItems(ctx, "alice")
		if err != nil || len(held) != 1 || held[0].ID != "c2" {
			t.Fatalf("alice holds %+v %v, want c2 alone", held, err)
		}
	})
	t.Run("RefusedAlone", func(t *testing.T) {
		s, db := mustService(t)
		mustSeed(t, s, "c1", "c2", "c3")
		first, err := s.Commit(ctx, move("p1", items.KindPickup, "c1", ground, alice, 3))
		if err != nil {
			t.Fatal(err)
		}
		other := move("p3", items.KindPickup, "c3", ground, alice, 3)
		other.InstanceID = "i2"
		a, err := s.CommitBatch(ctx, mapcontract.CriticalBatch{InstanceID: "i1", Events: []record.CriticalEvent{
			move("p1", items.KindPickup, "c1", ground, alice, 2), // a retry after the lease moved on: its first ack
			move("p2", items.KindPickup, "c2", ground, alice, 2), // a stale epoch
			other, // another instance's
			move("p4", items.KindPickup, "c1", ground, alice, 3), // c1 is alice's already
			move("p5", items.KindPickup, "c3", ground, alice, 3),
		}})
		if err != nil {
			t.Fatal(err)
		}
		r := a.Results
		if r[0].Ack == nil || !r[0].Ack.Duplicate || r[0].Ack.Seq != first.Seq {
			t.Fatalf("retry answered %+v, want the first ack %+v", r[0], first)
		}
		for i, code := range map[int]string{1: apierr.ECONFLICT, 2: apierr.EFORBIDDEN, 3: items.CodeWrongPlace} {
			if r[i].Error == nil || r[i].Error.Code != code {
				t.Fatalf("result %d: %+v, want %s", i, r[i], code)
			}
		}
		if r[4].Ack == nil || r[4].Error != nil {
			t.Fatalf("result 4: %+v", r[4])
		}
		for _, id := range []string{"p2", "p3", "p4"} {
			if _, err := db.CriticalEvent(ctx, id); apierr.Code(err) != apierr.ENOTFOUND {
				t.Fatalf("refused event %s recorded", id)
			}
		}
	})
	t.Run("ErrBadRequest", func(t *testing.T) {
		s, _ := mustService(t)
		_, err := s.CommitBatch(ctx, mapcontract.CriticalBatch{InstanceID: "i1"})
		wantCode(t, err, apierr.EBADREQUEST)
		ev := move("p1", items.KindPickup, "c1", ground, alice, 3)
		_, err = s.CommitBatch(ctx, mapcontract.CriticalBatch{InstanceID: "i1", Events: []record.CriticalEvent{ev, ev}})
		wantCode(t, err, apierr.EBADREQUEST)
	})
}
