package game_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// recoveryFixture is a game of instance forest-1 whose pass runs every 30 ticks over
// two policies anchored on open ground: the regenerative unique "ember", used up at
// tick 0 with a cooldown of 60 ticks, and the quota "shard" with two anchors, copy 0
// at its anchor and copy 1 used up at tick 0 with no cooldown.
func recoveryFixture(t *testing.T) (*game.Game, []items.Place) {
	t.Helper()
	g, _ := mustNewGame(t)
	seed := g.ItemSeed()
	g.LoadItems(seed)
	anchor := func(i int) items.Place { p := seed[i].Place; p.X += 100; return p }
	anchors := []items.Place{anchor(0), anchor(1), anchor(2)}
	pols := []items.Policy{
		{ItemID: "shard", TemplateID: "relic-shard", Type: items.InstanceQuota, Anchors: anchors[1:], CooldownTicks: 0},
		{ItemID: "ember", TemplateID: "ember", Type: items.RegenerativeUnique, Anchors: anchors[:1], CooldownTicks: 60},
	}
	state := []items.Item{
		{ID: "ember", TemplateID: "ember", Quantity: 1, Place: items.Place{CharacterID: "c9"}, State: items.StateDestroyed, SinceTick: 0},
		{ID: "shard#0", TemplateID: "relic-shard", Quantity: 1, Place: anchors[1], State: items.StateActive},
		{ID: "shard#1", TemplateID: "relic-shard", Quantity: 1, Place: items.Place{CharacterID: "c9"}, State: items.StateDestroyed},
	}
	g.LoadItems(append(seed, state[1]))
	g.LoadRecovery(pols, state, 30)
	return g, anchors
}

// stepUntil steps g to tick n and returns the recoveries decided on the way: the
// critical events the game handed the kit on its own.
func stepUntil(g *game.Game, n uint64) []record.CriticalEvent {
	var out []record.CriticalEvent
	for g.Sim().Tick() < n {
		out = append(out, stepOut(g).Criticals...)
	}
	return out
}

func TestGame_RecoveryRespawnsAfterCooldown(t *testing.T) {
	g, anchors := recoveryFixture(t)
	evs := stepUntil(g, 30)
	if len(evs) != 1 || evs[0].EventID != "recover/forest-1/30/shard#1" || evs[0].Kind != string(items.KindRecover) || evs[0].MapTick != 30 {
		t.Fatalf("first pass: %+v", evs)
	}
	p, err := items.DecodePayload(evs[0].Payload)
	if err != nil || p.Trigger != items.TriggerQuota || p.To != anchors[2] || !p.From.Nowhere() {
		t.Fatalf("quota top-up %+v, %v", p, err)
	}
	if more := stepUntil(g, 59); len(more) != 0 {
		t.Fatalf("before the ember's cooldown, and with shard#1 in flight: %+v", more)
	}
	evs = stepUntil(g, 60)
	if len(evs) != 1 || evs[0].EventID != "recover/forest-1/60/ember" {
		t.Fatalf("at the cooldown: %+v", evs)
	}

	t.Run("ShownOnlyAfterDurableAck", func(t *testing.T) {
		if _, _, ok := g.WorldItem("ember"); ok {
			t.Fatal("the ember lies in the world before the ack")
		}
		if err := join(g, "c1", &record.CharacterState{MapID: mapgen.DefaultMapID, X: float64(anchors[0].X) / 100, Y: float64(anchors[0].Y) / 100}); err != nil {
			t.Fatal(err)
		}
		ev, err := settle(g, "recover/forest-1/60/ember", nil)
		if err != nil {
			t.Fatal(err)
		}
		it, slot, ok := g.WorldItem("ember")
		if !ok || it.Place != anchors[0] || !it.Live() || it.SinceTick != 60 {
			t.Fatalf("after the ack the ember is %+v (%v)", it, ok)
		}
		var frame struct {
			Name string
			Data game.ItemRecovered
		}
		if err := json.Unmarshal(ev.Frame, &frame); err != nil || frame.Name != game.EventItemRecovered ||
			frame.Data.ItemID != "ember" || frame.Data.Trigger != items.TriggerMissing || frame.Data.ID != uint64(g.Sim().Entities[slot].ID) {
			t.Fatalf("event %s: %v", ev.Frame, err)
		}
		if len(ev.CharacterIDs) != 1 || ev.CharacterIDs[0] != "c1" {
			t.Fatalf("viewers %v, want the player beside the anchor", ev.CharacterIDs)
		}
		if again := stepUntil(g, 120); len(again) != 0 {
			t.Fatalf("a recovered item was recovered again: %+v", again)
		}
	})

	t.Run("RefusedBacksOff", func(t *testing.T) {
		if _, err := settle(g, "recover/forest-1/30/shard#1", apierr.Errorf(items.CodeNotRecoverable, "it exists")); err != nil {
			t.Fatalf("a recovery's refusal answers no command, yet settle returned %v", err)
		}
		if _, _, ok := g.WorldItem("shard#1"); ok {
			t.Fatal("a refused recovery placed the item")
		}
		now := g.Sim().Tick()
		if evs := stepUntil(g, now+game.RecoveryBackoffPasses*30-1); len(evs) != 0 {
			t.Fatalf("a refused recovery was tried again within the back-off: %+v", evs)
		}
		if evs := stepUntil(g, now+game.RecoveryBackoffPasses*30); len(evs) != 1 || evs[0].EventID == "recover/forest-1/30/shard#1" {
			t.Fatalf("after the back-off: %+v", evs)
		}
	})
}

func TestGame_RecoveryIsDeterministic(t *testing.T) {
	run := func() string {
		g, _ := recoveryFixture(t)
		var out string
		for _, ev := range stepUntil(g, 90) {
			out += fmt.Sprintf("%s %s %d %s\n", ev.EventID, ev.Kind, ev.MapTick, ev.Payload)
			_, _ = settle(g, ev.EventID, nil)
		}
		return out
	}
	a, b := run(), run()
	if a != b || a == "" {
		t.Fatalf("two runs decided\n%s\nand\n%s", a, b)
	}
}

func TestGame_RecoveryFollowsPickups(t *testing.T) {
	g, anchors := recoveryFixture(t)
	pol := items.Policy{ItemID: "crown", TemplateID: "crown", Type: items.UniquePersistent, Anchors: anchors[:1], OwnershipTimeoutTicks: 30}
	crown := items.Item{ID: "crown", TemplateID: "crown", Quantity: 1, Place: anchors[0], State: items.StateActive}
	g.LoadItems(append(g.ItemSeed(), crown))
	g.LoadRecovery([]items.Policy{pol}, []items.Item{crown}, 30)
	if err := join(g, "c1", &record.CharacterState{MapID: mapgen.DefaultMapID, X: float64(anchors[0].X) / 100, Y: float64(anchors[0].Y) / 100}); err != nil {
		t.Fatal(err)
	}
	ev, err := tryBegin(g, "c1", "e1", game.Pickup{ItemID: "crown"})
	if err != nil || ev == nil {
		t.Fatalf("pickup: %v", err)
	}
	if evs := stepUntil(g, 30); len(evs) != 0 {
		t.Fatalf("a pending pickup was recovered: %+v", evs)
	}
	if _, err := settle(g, "e1", nil); err != nil {
		t.Fatal(err)
	}
	if evs := stepUntil(g, 60); len(evs) != 0 {
		t.Fatalf("a crown held by a player here was recovered: %+v", evs)
	}
	g.Leave("c1") // leaves holding it
	if evs := stepUntil(g, 60+30); len(evs) != 1 {
		t.Fatalf("the crown of a player who left %d ticks ago: %+v", 60, evs)
	} else if p, _ := items.DecodePayload(evs[0].Payload); p.Trigger != items.TriggerOwnershipTimeout || p.From.CharacterID != "c1" || p.To != anchors[0] {
		t.Fatalf("ownership timeout %+v", p)
	}
}
