package sqlite_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
)

func groundItem(id, tmpl string, q int64) items.Item {
	return items.Item{ID: id, TemplateID: tmpl, Quantity: q, Place: ground, State: items.StateActive}
}

func mv(id, tmpl string, q int64, from, to items.Place) items.Move {
	return items.Move{ItemID: id, TemplateID: tmpl, Quantity: q, From: from, To: to}
}

// itemsFixture: alice and bob, alice holds a sword and 5 apples, bob 30 coins, and a
// torch lies on the ground of i1.
func itemsFixture(t *testing.T) *sqlite.DB {
	db := MustOpenDB(t)
	MustCharacter(t, db, "alice")
	MustCharacter(t, db, "bob")
	MustSeed(t, db, groundItem("sword-1", "sword", 1), groundItem("apples", "apple", 5), groundItem("gold", "coin", 30), groundItem("torch-1", "torch", 1))
	MustCommit(t, db, ItemEvent("f1", items.KindPickup, 1, mv("sword-1", "sword", 1, ground, alice)))
	MustCommit(t, db, ItemEvent("f2", items.KindPickup, 1, mv("apples", "apple", 5, ground, alice)))
	MustCommit(t, db, ItemEvent("f3", items.KindPickup, 1, mv("gold", "coin", 30, ground, bob)))
	return db
}

// wantUnchanged fails the test if a refused event left a trace: its event row, an audit
// row, or a changed item.
func wantUnchanged(t *testing.T, db *sqlite.DB, eventID string) {
	t.Helper()
	if _, err := db.CriticalEvent(context.Background(), eventID); apierr.Code(err) != apierr.ENOTFOUND {
		t.Fatalf("refused event %s was recorded: %v", eventID, err)
	}
	raw := MustRawDB(t, db.Path)
	if n := MustCount(t, raw, `SELECT COUNT(*) FROM audit_log WHERE ref = ?`, eventID); n != 0 {
		t.Fatalf("refused event %s was audited", eventID)
	}
	WantItems(t, db, "alice", map[string]int64{"apples": 5, "sword-1": 1})
	WantItems(t, db, "bob", map[string]int64{"gold": 30})
}

func TestDB_CommitCritical_Items(t *testing.T) {
	ctx := context.Background()
	t.Run("AppliedOnceUnderConcurrentRetries", func(t *testing.T) {
		db := itemsFixture(t)
		ev := ItemEvent("p1", items.KindPickup, 7, mv("torch-1", "torch", 1, ground, alice))
		acks := make([]record.CriticalAck, 8)
		var wg sync.WaitGroup
		for i := range acks { // concurrent retries land in one group or several
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if acks[i], err = Commit(t, db, ev); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		dups := 0
		for _, a := range acks {
			if a.Seq != acks[0].Seq {
				t.Fatalf("acks differ: %+v", acks)
			}
			if a.Duplicate {
				dups++
			}
		}
		if dups != len(acks)-1 {
			t.Fatalf("%d duplicates among %d acks, want %d", dups, len(acks), len(acks)-1)
		}
		WantItems(t, db, "alice", map[string]int64{"apples": 5, "sword-1": 1, "torch-1": 1})
		raw := MustRawDB(t, db.Path)
		if n := MustCount(t, raw, `SELECT COUNT(*) FROM inventory_items WHERE item_id = 'torch-1'`); n != 1 {
			t.Fatalf("torch rows=%d", n)
		}
	})
	t.Run("RefusedEventChangesNothing", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			ev   record.CriticalEvent
			code string
		}{
			{"WrongPlace", ItemEvent("r1", items.KindTrade, 2, mv("gold", "coin", 30, alice, bob)), items.CodeWrongPlace},
			{"NothingFromNothing", ItemEvent("r2", items.KindPickup, 2, mv("conjured", "coin", 100, ground, alice)), items.CodeNotFound},
			{"Overconsume", ItemEvent("r3", items.KindConsume, 2, mv("apples", "apple", 6, alice, items.Place{})), items.CodeQuantity},
			{"TradeAllOrNothing", ItemEvent("r4", items.KindTrade, 2, mv("sword-1", "sword", 1, alice, bob), mv("gold", "coin", 29, bob, alice)), items.CodeQuantity},
			{"UnknownHolder", ItemEvent("r5", items.KindTrade, 2, mv("sword-1", "sword", 1, alice, items.Place{CharacterID: "ghost"})), apierr.ENOTFOUND},
		} {
			t.Run(tc.name, func(t *testing.T) {
				db := itemsFixture(t)
				_, err := Commit(t, db, tc.ev)
				WantCode(t, err, tc.code)
				wantUnchanged(t, db, tc.ev.EventID)
			})
		}
	})
	t.Run("TradeAtomic", func(t *testing.T) {
		db := itemsFixture(t)
		MustCommit(t, db, ItemEvent("t1", items.KindTrade, 3, mv("sword-1", "sword", 1, alice, bob), mv("gold", "coin", 30, bob, alice)))
		WantItems(t, db, "alice", map[string]int64{"apples": 5, "gold": 30})
		WantItems(t, db, "bob", map[string]int64{"sword-1": 1})
	})
	t.Run("ConsumeThenUsedUp", func(t *testing.T) {
		db := itemsFixture(t)
		MustCommit(t, db, ItemEvent("c1", items.KindConsume, 4, mv("apples", "apple", 2, alice, items.Place{})))
		WantItems(t, db, "alice", map[string]int64{"apples": 3, "sword-1": 1})
		MustCommit(t, db, ItemEvent("c2", items.KindConsume, 5, mv("apples", "apple", 3, alice, items.Place{})))
		WantItems(t, db, "alice", map[string]int64{"sword-1": 1})
		// The used-up row stays, so a restarted map seeding "apples" again gets nothing back.
		MustSeed(t, db) // no-op
		list, err := db.InstanceItems(ctx, "i1", []string{"apples"})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].ID != "apples" || list[0].State != items.StateDestroyed || list[0].SinceTick != 5 {
			t.Fatalf("instance items %+v", list)
		}
	})
	t.Run("FailingEventDoesNotPoisonGroup", func(t *testing.T) {
		db := itemsFixture(t)
		const n = 64
		seed := make([]items.Item, 0, n)
		for i := 0; i < n; i += 2 {
			seed = append(seed, groundItem(fmt.Sprintf("it-%d", i), "coin", 1))
		}
		MustSeed(t, db, seed...)
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Odd events pick up items that were never seeded: each fails alone.
				_, errs[i] = Commit(t, db, ItemEvent(fmt.Sprintf("g-%d", i), items.KindPickup, 9, mv(fmt.Sprintf("it-%d", i), "coin", 1, ground, bob)))
			}()
		}
		wg.Wait()
		want := map[string]int64{"gold": 30}
		for i, err := range errs {
			if i%2 == 1 {
				WantCode(t, err, items.CodeNotFound)
				continue
			} else if err != nil {
				t.Errorf("event %d: %v", i, err)
			}
			want[fmt.Sprintf("it-%d", i)] = 1
		}
		WantItems(t, db, "bob", want)
	})
}

// TestDB_ItemRecovery is the recovery fixture end to end through the store: a used-up
// regenerative unique item is refused before its cooldown and respawns at its anchor
// after it, with exactly one append-only audit row, whatever the retries.
func TestDB_ItemRecovery(t *testing.T) {
	ctx := context.Background()
	anchor := items.Place{InstanceID: "i1", X: 500, Y: 500}
	db := itemsFixture(t)
	if _, err := db.PutItemPolicy(ctx, items.Policy{ItemID: "ember", TemplateID: "ember", Type: items.RegenerativeUnique,
		Anchors: []items.Place{anchor}, CooldownTicks: 300}); err != nil {
		t.Fatal(err)
	}
	pols, err := db.ItemPolicies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Never spawned: the pass places it at once.
	in := items.RecoveryInput{InstanceID: "i1", Tick: 10, Policies: pols, Catalog: items.DefaultCatalog()}
	act := items.Recover(in)
	if len(act) != 1 || act[0].Trigger != items.TriggerMissing {
		t.Fatalf("first pass %+v", act)
	}
	first := act[0].Event("i1", 10)
	MustCommit(t, db, record.CriticalEvent{EventID: first.ID, InstanceID: "i1", Kind: string(first.Kind), MapTick: 10, Payload: first.Payload.Encode()})
	MustCommit(t, db, ItemEvent("pick", items.KindPickup, 20, mv("ember", "ember", 1, anchor, alice)))
	MustCommit(t, db, ItemEvent("use", items.KindConsume, 100, mv("ember", "ember", 1, alice, items.Place{})))

	recover := func(tick int64) (record.CriticalEvent, []items.Action) {
		state, err := db.InstanceItems(ctx, "i1", []string{"ember"})
		if err != nil {
			t.Fatal(err)
		}
		in.Tick, in.Items = tick, state
		act := items.Recover(in)
		ev := items.Action{Trigger: items.TriggerMissing, Move: mv("ember", "ember", 1, items.Place{}, anchor)}.Event("i1", tick)
		return record.CriticalEvent{EventID: ev.ID, InstanceID: "i1", Kind: string(ev.Kind), MapTick: tick, Payload: ev.Payload.Encode()}, act
	}
	early, act := recover(399)
	if len(act) != 0 {
		t.Fatalf("the pass recovers before the cooldown: %+v", act)
	}
	_, err = Commit(t, db, early)
	WantCode(t, err, items.CodeCooldown)

	due, act := recover(400)
	if len(act) != 1 || act[0].ItemID != "ember" {
		t.Fatalf("the pass at the cooldown: %+v", act)
	}
	MustCommit(t, db, due)
	if ack := MustCommit(t, db, due); !ack.Duplicate {
		t.Fatalf("retry ack %+v", ack)
	}
	list, err := db.InstanceItems(ctx, "i1", []string{"ember"})
	if err != nil {
		t.Fatal(err)
	}
	var ember items.Item
	for _, it := range list {
		if it.ID == "ember" {
			ember = it
		}
	}
	if ember.Place != anchor || !ember.Live() || ember.SinceTick != 400 {
		t.Fatalf("ember %+v, want live at its anchor", ember)
	}
	recs, err := db.ItemRecoveries(ctx, "ember", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("recoveries %+v, want the first placement and the respawn", recs)
	}
	if r := recs[1]; r.Tick != 400 || r.Trigger != items.TriggerMissing || r.From != alice || r.To != anchor || r.EventID != due.EventID {
		t.Fatalf("audit row %+v", r)
	}
	raw := MustRawDB(t, db.Path)
	for _, q := range []string{`UPDATE item_recoveries SET tick = 0`, `DELETE FROM item_recoveries`} {
		if _, err := raw.Exec(q); err == nil {
			t.Fatalf("%s succeeded on the append-only audit", q)
		}
	}
}

func TestDB_ItemPolicies(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	p := items.Policy{ItemID: "shard", TemplateID: "relic-shard", Type: items.InstanceQuota, CooldownTicks: 5, QuestGate: "altar",
		Anchors: []items.Place{{InstanceID: "i1", X: 1, Y: 2}, {InstanceID: "i2", X: -3, Y: 4}}}
	if created, err := db.PutItemPolicy(ctx, p); err != nil || !created {
		t.Fatalf("created=%v err=%v", created, err)
	}
	p.OwnershipTimeoutTicks = 9
	if created, err := db.PutItemPolicy(ctx, p); err != nil || created {
		t.Fatalf("created=%v err=%v", created, err)
	}
	got, err := db.ItemPolicy(ctx, "shard")
	if err != nil || fmt.Sprint(got) != fmt.Sprint(p) {
		t.Fatalf("got %+v %v, want %+v", got, err, p)
	}
	if err := db.DeleteItemPolicy(ctx, "shard"); err != nil {
		t.Fatal(err)
	}
	WantCode(t, db.DeleteItemPolicy(ctx, "shard"), apierr.ENOTFOUND)
	_, err = db.ItemPolicy(ctx, "shard")
	WantCode(t, err, apierr.ENOTFOUND)
}
