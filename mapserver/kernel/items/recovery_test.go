package items_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/items"
)

// recoveryFixture: a regenerative unique ember used up at tick 100 (cooldown 300), a
// quota of three shards of which one exists, a crown held by bob since tick 10
// (timeout 50), a key lying in a pit, and a sword no policy keeps.
func recoveryFixture() items.RecoveryInput {
	pit := items.Place{InstanceID: "i1", X: -5, Y: -5}
	a0, a1, a2 := anchor, items.Place{InstanceID: "i1", X: 2000, Y: 0}, items.Place{InstanceID: "i1", X: 3000, Y: 0}
	return items.RecoveryInput{
		InstanceID: "i1",
		Tick:       400,
		Items: []items.Item{
			{ID: "ember", TemplateID: "ember", Quantity: 1, Place: alice, State: items.StateDestroyed, SinceTick: 100},
			{ID: "shard#1", TemplateID: "relic-shard", Quantity: 1, Place: a1, State: items.StateActive},
			{ID: "shard#2", TemplateID: "relic-shard", Quantity: 1, Place: alice, State: items.StateDestroyed, SinceTick: 390},
			{ID: "crown", TemplateID: "crown", Quantity: 1, Place: bob, State: items.StateActive, SinceTick: 10},
			{ID: "key", TemplateID: "gate-key", Quantity: 1, Place: pit, State: items.StateActive},
			{ID: "sword-1", TemplateID: "sword", Quantity: 1, Place: pit, State: items.StateActive},
		},
		Policies: []items.Policy{
			{ItemID: "ember", TemplateID: "ember", Type: items.RegenerativeUnique, Anchors: []items.Place{anchor}, CooldownTicks: 300},
			{ItemID: "shard", TemplateID: "relic-shard", Type: items.InstanceQuota, Anchors: []items.Place{a0, a1, a2}, CooldownTicks: 20},
			{ItemID: "crown", TemplateID: "crown", Type: items.UniquePersistent, Anchors: []items.Place{anchor}, OwnershipTimeoutTicks: 50},
			{ItemID: "key", TemplateID: "gate-key", Type: items.UniquePersistent, Anchors: []items.Place{anchor}},
			{ItemID: "elsewhere", TemplateID: "gate-key", Type: items.UniquePersistent, Anchors: []items.Place{other}},
		},
		Active:    []string{"alice"},
		Reachable: func(p items.Place) bool { return p.X >= 0 && p.Y >= 0 },
		Catalog:   items.DefaultCatalog(),
	}
}

func actionsString(as []items.Action) string {
	s := ""
	for _, a := range as {
		s += fmt.Sprintf("%s:%s:%s->%s;", a.ItemID, a.Trigger, a.From, a.To)
	}
	return s
}

func TestRecover(t *testing.T) {
	t.Run("EveryTrigger", func(t *testing.T) {
		got := actionsString(items.Recover(recoveryFixture()))
		want := "crown:ownership_timeout:character:bob->world:i1@1000,1000;" +
			"ember:missing:nowhere->world:i1@1000,1000;" +
			"key:invalid_place:world:i1@-5,-5->world:i1@1000,1000;" +
			"shard#0:quota:nowhere->world:i1@1000,1000;"
		if got != want {
			t.Fatalf("actions\n got %s\nwant %s", got, want)
		}
	})
	t.Run("NothingBeforeCooldown", func(t *testing.T) {
		in := recoveryFixture()
		in.Tick = 399 // ember used up at 100 with a cooldown of 300
		for _, a := range items.Recover(in) {
			if a.ItemID == "ember" || a.ItemID == "shard#2" {
				t.Fatalf("%s recovered before its cooldown: %+v", a.ItemID, a)
			}
		}
		in.Tick = 410 // shard#2 used up at 390, cooldown 20
		if got := actionsString(items.Recover(in)); !containsAction(items.Recover(in), "shard#2", items.TriggerQuota) {
			t.Fatalf("shard#2 not topped up at 410: %s", got)
		}
	})
	t.Run("ActiveHolderKeepsItem", func(t *testing.T) {
		in := recoveryFixture()
		in.Active = append(in.Active, "bob")
		if containsAction(items.Recover(in), "crown", items.TriggerOwnershipTimeout) {
			t.Fatal("the crown was taken from an active character")
		}
	})
	t.Run("ClosedGateDelaysRespawn", func(t *testing.T) {
		in := recoveryFixture()
		in.Policies[0].QuestGate = "ember-altar"
		in.GateOpen = func(string) bool { return false }
		if containsAction(items.Recover(in), "ember", items.TriggerMissing) {
			t.Fatal("the ember respawned behind a closed gate")
		}
	})
	t.Run("UniqueAliveElsewhereNotRespawned", func(t *testing.T) {
		in := recoveryFixture()
		in.Items = append(in.Items, items.Item{ID: "ember-2", TemplateID: "ember", Quantity: 1, Place: bob, State: items.StateActive})
		if containsAction(items.Recover(in), "ember", items.TriggerMissing) {
			t.Fatal("a second live ember would be made")
		}
	})
	t.Run("SameInputsSameActions", func(t *testing.T) {
		want := actionsString(items.Recover(recoveryFixture()))
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 50; i++ {
			in := recoveryFixture()
			rng.Shuffle(len(in.Items), func(a, b int) { in.Items[a], in.Items[b] = in.Items[b], in.Items[a] })
			rng.Shuffle(len(in.Policies), func(a, b int) { in.Policies[a], in.Policies[b] = in.Policies[b], in.Policies[a] })
			if got := actionsString(items.Recover(in)); got != want {
				t.Fatalf("shuffled input %d gave\n%s\nwant\n%s", i, got, want)
			}
		}
	})
	t.Run("ActionsPassTheRules", func(t *testing.T) {
		// Every action the pass decides is an event the rules allow, so the orchestrator
		// accepts what the map proposes; applying them leaves nothing more to recover.
		in := recoveryFixture()
		led := items.NewMemLedger(in.Items, in.Policies)
		for _, a := range items.Recover(in) {
			if _, err := led.Apply(in.Catalog, a.Event("i1", in.Tick)); err != nil {
				t.Fatalf("%+v: %v", a, err)
			}
		}
		in.Items = led.Items()
		in.Active = append(in.Active, "bob")
		if again := items.Recover(in); len(again) != 0 {
			t.Fatalf("after recovery: %s", actionsString(again))
		}
	})
	t.Run("EventIDIsDeterministic", func(t *testing.T) {
		a := items.Recover(recoveryFixture())[0]
		if got, want := a.Event("i1", 400).ID, "recover/i1/400/crown"; got != want {
			t.Fatalf("id=%q, want %q", got, want)
		}
	})
}

func containsAction(as []items.Action, itemID, trigger string) bool {
	return slices.ContainsFunc(as, func(a items.Action) bool { return a.ItemID == itemID && a.Trigger == trigger })
}

func TestPolicy_Validate(t *testing.T) {
	cat := items.DefaultCatalog()
	ok := items.Policy{ItemID: "crown", TemplateID: "crown", Type: items.UniquePersistent, Anchors: []items.Place{anchor}}
	if err := ok.Validate(cat); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(p *items.Policy){
		"HashInID":          func(p *items.Policy) { p.ItemID = "a#1" },
		"UnknownTemplate":   func(p *items.Policy) { p.TemplateID = "lamp" },
		"NotCritical":       func(p *items.Policy) { p.TemplateID = "sword" },
		"UnknownType":       func(p *items.Policy) { p.Type = "forever" },
		"NoAnchor":          func(p *items.Policy) { p.Anchors = nil },
		"HeldAnchor":        func(p *items.Policy) { p.Anchors = []items.Place{alice} },
		"NegativeCooldown":  func(p *items.Policy) { p.CooldownTicks = -1 },
		"NegativeTimeout":   func(p *items.Policy) { p.OwnershipTimeoutTicks = -1 },
		"GateWithSpace":     func(p *items.Policy) { p.QuestGate = "a b" },
		"UniqueQuota":       func(p *items.Policy) { p.Type, p.Anchors = items.InstanceQuota, []items.Place{anchor, ground} },
		"PersistentConsume": func(p *items.Policy) { p.TemplateID = "ember" },
	} {
		t.Run(name, func(t *testing.T) {
			p := ok
			mut(&p)
			if err := p.Validate(cat); err == nil {
				t.Fatalf("%+v validated", p)
			}
		})
	}
	if got := items.PolicyItemID("shard#12"); got != "shard" {
		t.Fatalf("PolicyItemID=%q", got)
	}
}
