package items_test

import (
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/items"
)

var (
	alice  = items.Place{CharacterID: "alice"}
	bob    = items.Place{CharacterID: "bob"}
	ground = items.Place{InstanceID: "i1", X: 100, Y: 200}
	other  = items.Place{InstanceID: "i2", X: 5, Y: 5}
	anchor = items.Place{InstanceID: "i1", X: 1000, Y: 1000}
)

// fixture is the ownership state every rule test starts from.
func fixture() *items.MemLedger {
	return items.NewMemLedger([]items.Item{
		{ID: "apples", TemplateID: "apple", Quantity: 5, Place: alice, State: items.StateActive, SinceTick: 1},
		{ID: "sword-1", TemplateID: "sword", Quantity: 1, Place: alice, State: items.StateActive},
		{ID: "gold", TemplateID: "coin", Quantity: 30, Place: bob, State: items.StateActive},
		{ID: "torch-1", TemplateID: "torch", Quantity: 2, Place: ground, State: items.StateActive},
		{ID: "torch-far", TemplateID: "torch", Quantity: 1, Place: other, State: items.StateActive},
		{ID: "crown", TemplateID: "crown", Quantity: 1, Place: bob, State: items.StateActive, SinceTick: 10},
		{ID: "ember", TemplateID: "ember", Quantity: 1, Place: alice, State: items.StateDestroyed, SinceTick: 100},
		{ID: "key", TemplateID: "gate-key", Quantity: 1, Place: alice, State: items.StateActive},
	}, []items.Policy{
		{ItemID: "crown", TemplateID: "crown", Type: items.UniquePersistent, Anchors: []items.Place{anchor}, OwnershipTimeoutTicks: 50},
		{ItemID: "ember", TemplateID: "ember", Type: items.RegenerativeUnique, Anchors: []items.Place{anchor}, CooldownTicks: 300},
		{ItemID: "key", TemplateID: "gate-key", Type: items.UniquePersistent, Anchors: []items.Place{anchor}},
		{ItemID: "shard", TemplateID: "relic-shard", Type: items.InstanceQuota, Anchors: []items.Place{anchor, ground}, CooldownTicks: 20},
	})
}

func ev(kind items.Kind, tick int64, m items.Move) items.Event {
	return items.Event{ID: "e1", Kind: kind, InstanceID: "i1", MapTick: tick, Payload: items.Payload{Move: m}}
}

func mv(id, tmpl string, q int64, from, to items.Place) items.Move {
	return items.Move{ItemID: id, TemplateID: tmpl, Quantity: q, From: from, To: to}
}

func recov(trigger string, tick int64, m items.Move) items.Event {
	e := ev(items.KindRecover, tick, m)
	e.Trigger = trigger
	return e
}

func TestApply_Allowed(t *testing.T) {
	cat := items.DefaultCatalog()
	for _, tc := range []struct {
		name string
		ev   items.Event
		want []items.Item
	}{
		{"Pickup", ev(items.KindPickup, 7, mv("torch-1", "torch", 2, ground, alice)),
			[]items.Item{{ID: "torch-1", TemplateID: "torch", Quantity: 2, Place: alice, State: items.StateActive, SinceTick: 7}}},
		{"Drop", ev(items.KindDrop, 8, mv("sword-1", "sword", 1, alice, ground)),
			[]items.Item{{ID: "sword-1", TemplateID: "sword", Quantity: 1, Place: ground, State: items.StateActive, SinceTick: 8}}},
		{"ConsumeSome", ev(items.KindConsume, 9, mv("apples", "apple", 2, alice, items.Place{})),
			[]items.Item{{ID: "apples", TemplateID: "apple", Quantity: 3, Place: alice, State: items.StateActive, SinceTick: 9}}},
		{"ConsumeAllDestroys", ev(items.KindConsume, 9, mv("apples", "apple", 5, alice, items.Place{})),
			[]items.Item{{ID: "apples", TemplateID: "apple", Quantity: 0, Place: alice, State: items.StateDestroyed, SinceTick: 9}}},
		{"TradeWithExchange", func() items.Event {
			e := ev(items.KindTrade, 3, mv("sword-1", "sword", 1, alice, bob))
			e.Exchange = []items.Move{mv("gold", "coin", 30, bob, alice)}
			return e
		}(), []items.Item{
			{ID: "sword-1", TemplateID: "sword", Quantity: 1, Place: bob, State: items.StateActive, SinceTick: 3},
			{ID: "gold", TemplateID: "coin", Quantity: 30, Place: alice, State: items.StateActive, SinceTick: 3}}},
		{"RecoverRegenerativeAfterCooldown", recov(items.TriggerMissing, 400, mv("ember", "ember", 1, items.Place{}, anchor)),
			[]items.Item{{ID: "ember", TemplateID: "ember", Quantity: 1, Place: anchor, State: items.StateActive, SinceTick: 400}}},
		{"RecoverQuotaCopy", recov(items.TriggerQuota, 5, mv("shard#1", "relic-shard", 1, items.Place{}, ground)),
			[]items.Item{{ID: "shard#1", TemplateID: "relic-shard", Quantity: 1, Place: ground, State: items.StateActive, SinceTick: 5}}},
		{"RecoverTimeout", recov(items.TriggerOwnershipTimeout, 60, mv("crown", "crown", 1, bob, anchor)),
			[]items.Item{{ID: "crown", TemplateID: "crown", Quantity: 1, Place: anchor, State: items.StateActive, SinceTick: 60}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			led := fixture()
			out, err := led.Apply(cat, tc.ev)
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Items) != len(tc.want) {
				t.Fatalf("items=%+v, want %+v", out.Items, tc.want)
			}
			for i := range tc.want {
				if out.Items[i] != tc.want[i] {
					t.Errorf("item %d=%+v, want %+v", i, out.Items[i], tc.want[i])
				}
				if got, _, _ := led.Item(tc.want[i].ID); got != tc.want[i] {
					t.Errorf("stored %+v", got)
				}
			}
			if (out.Recovery != nil) != (tc.ev.Kind == items.KindRecover) {
				t.Fatalf("recovery=%+v", out.Recovery)
			}
		})
	}
	t.Run("RecoveryAuditKeepsLastPlace", func(t *testing.T) {
		out, err := fixture().Apply(cat, recov(items.TriggerMissing, 400, mv("ember", "ember", 1, items.Place{}, anchor)))
		if err != nil {
			t.Fatal(err)
		}
		want := items.Recovery{Tick: 400, ItemID: "ember", Trigger: items.TriggerMissing, From: alice, To: anchor}
		if *out.Recovery != want {
			t.Fatalf("recovery=%+v, want %+v", *out.Recovery, want)
		}
	})
}

func TestApply_Refusals(t *testing.T) {
	cat := items.DefaultCatalog()
	nowhere := items.Place{}
	for _, tc := range []struct {
		name string
		ev   items.Event
		code string
	}{
		{"UnknownKind", ev("item_steal", 1, mv("gold", "coin", 30, bob, alice)), items.CodeMalformed},
		{"NegativeTick", ev(items.KindPickup, -1, mv("torch-1", "torch", 2, ground, alice)), items.CodeMalformed},
		{"ZeroQuantity", ev(items.KindPickup, 1, mv("torch-1", "torch", 0, ground, alice)), items.CodeMalformed},
		{"BadItemID", ev(items.KindPickup, 1, mv("has space", "torch", 1, ground, alice)), items.CodeMalformed},
		{"TwoOwnersInPlace", ev(items.KindPickup, 1, mv("torch-1", "torch", 2, ground, items.Place{CharacterID: "a", InstanceID: "i1"})), items.CodeMalformed},
		{"TriggerOutsideRecover", func() items.Event {
			e := ev(items.KindPickup, 1, mv("torch-1", "torch", 2, ground, alice))
			e.Trigger = items.TriggerMissing
			return e
		}(), items.CodeMalformed},
		{"ExchangeOutsideTrade", func() items.Event {
			e := ev(items.KindDrop, 1, mv("sword-1", "sword", 1, alice, ground))
			e.Exchange = []items.Move{mv("gold", "coin", 30, bob, alice)}
			return e
		}(), items.CodeMalformed},
		{"SameItemTwice", func() items.Event {
			e := ev(items.KindTrade, 1, mv("sword-1", "sword", 1, alice, bob))
			e.Exchange = []items.Move{mv("sword-1", "sword", 1, bob, alice)}
			return e
		}(), items.CodeMalformed},
		{"UnknownTrigger", recov("because", 1, mv("crown", "crown", 1, bob, anchor)), items.CodeMalformed},
		{"PickupFromOtherInstance", ev(items.KindPickup, 1, mv("torch-far", "torch", 1, other, alice)), items.CodeIllegalMove},
		{"PickupToGround", ev(items.KindPickup, 1, mv("torch-1", "torch", 2, ground, anchor)), items.CodeIllegalMove},
		{"DropToOtherInstance", ev(items.KindDrop, 1, mv("sword-1", "sword", 1, alice, other)), items.CodeIllegalMove},
		{"TradeToSelf", ev(items.KindTrade, 1, mv("sword-1", "sword", 1, alice, alice)), items.CodeIllegalMove},
		{"ExchangeWrongWay", func() items.Event {
			e := ev(items.KindTrade, 1, mv("sword-1", "sword", 1, alice, bob))
			e.Exchange = []items.Move{mv("apples", "apple", 5, alice, bob)}
			return e
		}(), items.CodeIllegalMove},
		{"ConsumeToGround", ev(items.KindConsume, 1, mv("apples", "apple", 1, alice, ground)), items.CodeIllegalMove},
		{"RecoverToOtherInstance", recov(items.TriggerMissing, 1, mv("ember", "ember", 1, nowhere, other)), items.CodeIllegalMove},
		{"RecoverMissingFromSomewhere", recov(items.TriggerMissing, 1, mv("ember", "ember", 1, alice, anchor)), items.CodeIllegalMove},
		{"UnknownTemplate", ev(items.KindPickup, 1, mv("torch-1", "lamp", 2, ground, alice)), items.CodeUnknownTemplate},
		{"OverStack", ev(items.KindPickup, 1, mv("torch-1", "torch", 6, ground, alice)), items.CodeQuantity},
		{"NothingFromNothing", ev(items.KindPickup, 1, mv("conjured", "coin", 1000, ground, alice)), items.CodeNotFound},
		{"UsedUpItem", ev(items.KindDrop, 1, mv("ember", "ember", 1, alice, ground)), items.CodeNotFound},
		{"TemplateMismatch", ev(items.KindPickup, 1, mv("torch-1", "coin", 2, ground, alice)), items.CodeTemplateMismatch},
		{"NotHeldByGiver", ev(items.KindTrade, 1, mv("gold", "coin", 30, alice, bob)), items.CodeWrongPlace},
		{"PickupFromWrongSpot", ev(items.KindPickup, 1, mv("torch-1", "torch", 2, items.Place{InstanceID: "i1", X: 1}, alice)), items.CodeWrongPlace},
		{"PartialMove", ev(items.KindPickup, 1, mv("torch-1", "torch", 1, ground, alice)), items.CodeQuantity},
		{"Overconsume", ev(items.KindConsume, 1, mv("apples", "apple", 6, alice, nowhere)), items.CodeQuantity},
		{"NotConsumable", ev(items.KindConsume, 1, mv("sword-1", "sword", 1, alice, nowhere)), items.CodeNotConsumable},
		{"TradeAllOrNothing", func() items.Event {
			e := ev(items.KindTrade, 1, mv("sword-1", "sword", 1, alice, bob))
			e.Exchange = []items.Move{mv("gold", "coin", 31, bob, alice)}
			return e
		}(), items.CodeQuantity},
		{"RecoverWithoutPolicy", recov(items.TriggerMissing, 1, mv("sword-9", "sword", 1, nowhere, anchor)), items.CodeNoPolicy},
		{"RecoverWrongTemplate", recov(items.TriggerMissing, 400, mv("ember", "crown", 1, nowhere, anchor)), items.CodeTemplateMismatch},
		{"RecoverOffAnchor", recov(items.TriggerMissing, 400, mv("ember", "ember", 1, nowhere, ground)), items.CodeNotAnchor},
		{"RecoverQuotaCopyOffItsAnchor", recov(items.TriggerQuota, 1, mv("shard#0", "relic-shard", 1, nowhere, ground)), items.CodeNotAnchor},
		{"RecoverLiveItem", recov(items.TriggerMissing, 400, mv("key", "gate-key", 1, nowhere, anchor)), items.CodeNotRecoverable},
		{"RecoverQuotaAsMissing", recov(items.TriggerMissing, 1, mv("shard#0", "relic-shard", 1, nowhere, anchor)), items.CodeNotRecoverable},
		{"TimeoutNotPassed", recov(items.TriggerOwnershipTimeout, 59, mv("crown", "crown", 1, bob, anchor)), items.CodeNotRecoverable},
		{"NoTimeoutPolicy", recov(items.TriggerOwnershipTimeout, 1000, mv("key", "gate-key", 1, alice, anchor)), items.CodeNotRecoverable},
		{"Cooldown", recov(items.TriggerMissing, 399, mv("ember", "ember", 1, nowhere, anchor)), items.CodeCooldown},
		{"RecoverTwoUnits", recov(items.TriggerQuota, 1, mv("shard#0", "relic-shard", 2, nowhere, anchor)), items.CodeQuantity},
		{"RecoverFromWrongPlace", recov(items.TriggerOwnershipTimeout, 60, mv("crown", "crown", 1, alice, anchor)), items.CodeWrongPlace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			led := fixture()
			before := led.Items()
			_, err := led.Apply(cat, tc.ev)
			if got := items.CodeOf(err); got != tc.code {
				t.Fatalf("code=%q (%v), want %q", got, err, tc.code)
			}
			if !strings.HasPrefix(items.CodeOf(err), items.CodePrefix) {
				t.Fatalf("code %q lacks the prefix", items.CodeOf(err))
			}
			if after := led.Items(); !equalItems(before, after) {
				t.Fatalf("a refused event changed the state:\n%+v\n%+v", before, after)
			}
		})
	}
	t.Run("ConsumePersistent", func(t *testing.T) {
		// unique_persistent policies refuse consumable templates, so this state can only
		// come from a policy changed after the fact; the rule still holds.
		led := items.NewMemLedger([]items.Item{{ID: "e", TemplateID: "ember", Quantity: 1, Place: alice, State: items.StateActive}},
			[]items.Policy{{ItemID: "e", TemplateID: "ember", Type: items.UniquePersistent, Anchors: []items.Place{anchor}}})
		_, err := led.Apply(cat, ev(items.KindConsume, 1, mv("e", "ember", 1, alice, nowhere)))
		if got := items.CodeOf(err); got != items.CodePersistent {
			t.Fatalf("code=%q, want %q", got, items.CodePersistent)
		}
	})
	t.Run("UniqueExists", func(t *testing.T) {
		led := items.NewMemLedger([]items.Item{{ID: "other-ember", TemplateID: "ember", Quantity: 1, Place: bob, State: items.StateActive}},
			[]items.Policy{{ItemID: "ember", TemplateID: "ember", Type: items.RegenerativeUnique, Anchors: []items.Place{anchor}}})
		_, err := led.Apply(cat, recov(items.TriggerMissing, 1, mv("ember", "ember", 1, nowhere, anchor)))
		if got := items.CodeOf(err); got != items.CodeUniqueExists {
			t.Fatalf("code=%q, want %q", got, items.CodeUniqueExists)
		}
	})
}

func equalItems(a, b []items.Item) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSpawn(t *testing.T) {
	cat := items.DefaultCatalog()
	seed := func(id, tmpl string, q int64, p items.Place) items.Item {
		return items.Item{ID: id, TemplateID: tmpl, Quantity: q, Place: p, State: items.StateActive}
	}
	for _, tc := range []struct {
		name  string
		it    items.Item
		known bool
		code  string
	}{
		{"New", seed("apple-9", "apple", 3, ground), false, ""},
		{"KnownIsKept", seed("torch-1", "torch", 2, ground), true, ""},
		{"KnownElsewhereIsKept", seed("sword-1", "sword", 1, ground), true, ""},
		{"ErrMalformed", seed("", "apple", 1, ground), false, items.CodeMalformed},
		{"ErrOtherInstance", seed("apple-9", "apple", 1, other), false, items.CodeIllegalMove},
		{"ErrHeld", seed("apple-9", "apple", 1, alice), false, items.CodeIllegalMove},
		{"ErrUnknownTemplate", seed("x", "lamp", 1, ground), false, items.CodeUnknownTemplate},
		{"ErrQuantity", seed("x", "apple", 21, ground), false, items.CodeQuantity},
		{"ErrCritical", seed("x", "crown", 1, ground), false, items.CodeCriticalSeed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			known, err := items.Spawn(cat, fixture(), "i1", tc.it)
			if items.CodeOf(err) != tc.code || known != tc.known {
				t.Fatalf("known=%v err=%v, want %v %q", known, err, tc.known, tc.code)
			}
		})
	}
}

func TestDecodePayload(t *testing.T) {
	p, err := items.DecodePayload([]byte(`{"itemId":"a","templateId":"apple","quantity":1,"from":{"characterId":"c"},"to":{}}`))
	if err != nil || p.ItemID != "a" || p.From.CharacterID != "c" || !p.To.Nowhere() {
		t.Fatalf("p=%+v err=%v", p, err)
	}
	round, err := items.DecodePayload(p.Encode())
	if err != nil || round.Move != p.Move {
		t.Fatalf("round trip %+v err=%v", round, err)
	}
	for _, bad := range []string{`{"itemId":"a","qty":1}`, `{"itemId":"a"} {}`, `[]`, `{"from":{"characterId":1}}`} {
		if _, err := items.DecodePayload([]byte(bad)); items.CodeOf(err) != items.CodeMalformed {
			t.Errorf("%s: err=%v, want %s", bad, err, items.CodeMalformed)
		}
	}
}

func TestEvent_Characters(t *testing.T) {
	e := ev(items.KindTrade, 1, mv("sword-1", "sword", 1, bob, alice))
	e.Exchange = []items.Move{mv("gold", "coin", 1, alice, bob)}
	if got := strings.Join(e.Characters(), ","); got != "alice,bob" {
		t.Fatalf("characters=%s", got)
	}
	r := recov(items.TriggerOwnershipTimeout, 1, mv("crown", "crown", 1, bob, anchor))
	if len(r.Characters()) != 0 || r.RecoveredFrom() != "bob" {
		t.Fatalf("recover characters=%v from=%q", r.Characters(), r.RecoveredFrom())
	}
}
