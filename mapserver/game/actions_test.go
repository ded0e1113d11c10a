package game_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// command decodes an item command.
func command(t *testing.T, g *game.Game, action, payload string) any {
	t.Helper()
	cmd, err := g.Decode(game.FeatureItems, action, json.RawMessage(payload))
	if err != nil {
		t.Fatalf("%s %s: %v", action, payload, err)
	}
	return cmd
}

// held is an item a character holds.
func held(id, template string, q int64, c string) items.Item {
	return items.Item{ID: id, TemplateID: template, Quantity: q, Place: items.Place{CharacterID: c}, State: items.StateActive}
}

// begin starts a critical item command and fails the test on a refusal.
func begin(t *testing.T, g *game.Game, c, eventID string, cmd any) *record.CriticalEvent {
	t.Helper()
	ev, err := tryBegin(g, c, eventID, cmd)
	if ev == nil || err != nil {
		t.Fatalf("begin %T: %v", cmd, err)
	}
	return ev
}

// decoded returns a critical event as the item rules see it.
func decoded(t *testing.T, ev *record.CriticalEvent) items.Event {
	t.Helper()
	p, err := items.DecodePayload(ev.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return items.Event{ID: ev.EventID, Kind: items.Kind(ev.Kind), InstanceID: ev.InstanceID, MapTick: ev.MapTick, Payload: p}
}

// named returns the events of evs with name, decoded into maps.
func named(evs []gameapi.Note, name string) []map[string]any {
	var out []map[string]any
	for _, ev := range evs {
		var env map[string]any
		if json.Unmarshal(ev.Frame, &env) == nil && env["name"] == name {
			env["viewers"] = strings.Join(ev.CharacterIDs, ",")
			out = append(out, env)
		}
	}
	return out
}

func TestGame_Drop(t *testing.T) {
	g := mustItemGame(t)
	spot := g.ItemSeed()[4]
	spawnAt(t, g, "c1", spot, 3)
	spawnAt(t, g, "c2", spot, 4)
	g.Carry("c1", []items.Item{held("c1-torch", "torch", 3, "c1"), held("c1-coin", "coin", 50, "c1")})

	_, err := tryBegin(g, "c1", "x", command(t, g, game.ActionDrop, `{"itemId":"nope"}`))
	wantCode(t, err, items.CodeNotFound)
	_, err = tryBegin(g, "c1", "x", command(t, g, game.ActionDrop, `{"itemId":"c1-coin","quantity":10}`))
	wantCode(t, err, items.CodeQuantity)
	_, err = tryBegin(g, "c2", "x", command(t, g, game.ActionDrop, `{"itemId":"c1-coin"}`))
	wantCode(t, err, items.CodeNotFound) // not c2's

	ev := begin(t, g, "c1", "ev-1", command(t, g, game.ActionDrop, `{"itemId":"c1-torch","quantity":3}`))
	d := decoded(t, ev)
	if err := d.Validate(); err != nil || d.Kind != items.KindDrop || d.To.InstanceID != "forest-1" || d.Quantity != 3 || len(ev.Epochs) != 1 || ev.Epochs["c1"] != 0 {
		t.Fatalf("drop event %+v: %v", d, err)
	}
	// Pending: the item cannot be dropped twice, consumed or offered meanwhile.
	_, err = tryBegin(g, "c1", "x", command(t, g, game.ActionDrop, `{"itemId":"c1-torch"}`))
	wantCode(t, err, game.CodeItemPending)
	wantCode(t, refused(g, "c1", command(t, g, game.ActionOffer, `{"toCharacterId":"c2","itemId":"c1-torch"}`)), game.CodeItemPending)
	if _, ok := g.Inventory("c1").Find("c1-torch"); !ok {
		t.Fatal("the item left the inventory before the durable ack")
	}

	// Refused (the orchestrator away): nothing changes hands, the item is free again.
	if _, err := settle(g, "ev-1", apierr.Errorf(apierr.EMAPUNAVAILABLE, "away")); apierr.Code(err) != apierr.EMAPUNAVAILABLE {
		t.Fatalf("settle: %v", err)
	}
	if _, ok := g.Inventory("c1").Find("c1-torch"); !ok || g.Sim().ItemCount() != len(g.ItemSeed()) {
		t.Fatal("a refused drop changed something")
	}

	begin(t, g, "c1", "ev-2", command(t, g, game.ActionDrop, `{"itemId":"c1-torch"}`))
	out, err := settle(g, "ev-2", nil)
	if err != nil {
		t.Fatal(err)
	}
	it, slot, ok := g.WorldItem("c1-torch")
	if !ok || it.Quantity != 3 || it.Place != d.To {
		t.Fatalf("dropped item in the world: %+v %v", it, ok)
	}
	me, _ := g.Slot("c1")
	if p, q := g.Sim().Entities[slot].Pos, g.Sim().Entities[me].Pos; (p.X-q.X)*(p.X-q.X)+(p.Y-q.Y)*(p.Y-q.Y) > game.Reach*game.Reach {
		t.Fatalf("dropped at %v, the character stands at %v", p, q)
	}
	if !strings.Contains(string(out.Frame), `"item_dropped"`) || len(out.CharacterIDs) != 2 {
		t.Fatalf("event %s to %v", out.Frame, out.CharacterIDs)
	}
	inv, _ := inventoryOf(t, step(g), "c1")
	if len(inv.Entries) != 1 || inv.Entries[0].ItemID != "c1-coin" {
		t.Fatalf("inventory after the drop %+v", inv)
	}
	// The other player picks it up from the ground.
	begin(t, g, "c2", "ev-3", pickup(t, g, "c1-torch"))
}

func TestGame_Consume(t *testing.T) {
	g := mustItemGame(t)
	spot := g.ItemSeed()[4]
	spawnAt(t, g, "c1", spot, 3)
	g.Carry("c1", []items.Item{held("apples", "apple", 2, "c1"), held("t", "torch", 1, "c1")})

	_, err := tryBegin(g, "c1", "x", command(t, g, game.ActionConsume, `{"itemId":"t"}`))
	wantCode(t, err, items.CodeNotConsumable)
	_, err = tryBegin(g, "c1", "x", command(t, g, game.ActionConsume, `{"itemId":"pear"}`))
	wantCode(t, err, items.CodeNotFound)

	ev := decoded(t, begin(t, g, "c1", "ev-1", command(t, g, game.ActionConsume, `{"itemId":"apples"}`)))
	if ev.Kind != items.KindConsume || ev.Quantity != 1 || !ev.To.Nowhere() {
		t.Fatalf("consume event %+v", ev)
	}
	_, err = tryBegin(g, "c1", "x", command(t, g, game.ActionConsume, `{"itemId":"apples"}`))
	wantCode(t, err, game.CodeItemPending)
	out, err := settle(g, "ev-1", nil)
	if err != nil || !strings.Contains(string(out.Frame), `"left":1`) {
		t.Fatalf("settle: %s %v", out.Frame, err)
	}
	begin(t, g, "c1", "ev-2", command(t, g, game.ActionConsume, `{"itemId":"apples"}`))
	if _, err := settle(g, "ev-2", nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.Inventory("c1").Find("apples"); ok {
		t.Fatal("an item used up is still held")
	}
	if inv, ok := inventoryOf(t, step(g), "c1"); !ok || len(inv.Entries) != 1 {
		t.Fatalf("inventory after consuming %+v", inv)
	}
}

// tradeID returns the trade id of the last "trade_offered" event among evs, checking
// it went to both parties.
func tradeID(t *testing.T, evs []gameapi.Note, from, to string) string {
	t.Helper()
	offered := named(evs, "trade_offered")
	if len(offered) != 1 || offered[0]["viewers"] != from+","+to {
		t.Fatalf("trade_offered events %v", offered)
	}
	return offered[0]["data"].(map[string]any)["tradeId"].(string)
}

func TestGame_Trade(t *testing.T) {
	g := mustItemGame(t)
	spot := g.ItemSeed()[4]
	spawnAt(t, g, "a", spot, 3)
	spawnAt(t, g, "b", spot, 5)
	spawnAt(t, g, "far", spot, 40)
	g.Carry("a", []items.Item{held("sword-1", "sword", 1, "a"), held("coins", "coin", 9, "a")})
	step(g)

	wantCode(t, refused(g, "a", command(t, g, game.ActionOffer, `{"toCharacterId":"ghost","itemId":"sword-1"}`)), game.CodeTradeAbsent)
	wantCode(t, refused(g, "a", command(t, g, game.ActionOffer, `{"toCharacterId":"far","itemId":"sword-1"}`)), game.CodeOutOfReach)
	wantCode(t, refused(g, "a", command(t, g, game.ActionOffer, `{"toCharacterId":"a","itemId":"sword-1"}`)), "bad_payload")
	wantCode(t, refused(g, "a", command(t, g, game.ActionOffer, `{"toCharacterId":"b","itemId":"shield"}`)), items.CodeNotFound)
	wantCode(t, refused(g, "a", command(t, g, game.ActionOffer, `{"toCharacterId":"b","itemId":"coins","quantity":2}`)), items.CodeQuantity)
	_, err := tryBegin(g, "b", "x", command(t, g, game.ActionAccept, `{"tradeId":"trade-99"}`))
	wantCode(t, err, game.CodeTradeNotFound)

	// Declined by the receiver: the item is free again.
	if err := refused(g, "a", command(t, g, game.ActionOffer, `{"toCharacterId":"b","itemId":"sword-1"}`)); err != nil {
		t.Fatal(err)
	}
	id := tradeID(t, step(g), "a", "b")
	_, err = tryBegin(g, "a", "x", command(t, g, game.ActionAccept, `{"tradeId":"`+id+`"}`))
	wantCode(t, err, game.CodeTradeNotFound) // only the receiver accepts
	wantCode(t, refused(g, "far", command(t, g, game.ActionDecline, `{"tradeId":"`+id+`"}`)), game.CodeTradeNotFound)
	if err := refused(g, "b", command(t, g, game.ActionDecline, `{"tradeId":"`+id+`"}`)); err != nil {
		t.Fatal(err)
	}
	if d := named(step(g), "trade_declined"); len(d) != 1 || d[0]["viewers"] != "a,b" || d[0]["data"].(map[string]any)["code"] != nil {
		t.Fatalf("trade_declined %v", d)
	}

	// Accepted, refused by the orchestrator: nothing changes hands, the offer ends.
	if err := refused(g, "a", command(t, g, game.ActionOffer, `{"toCharacterId":"b","itemId":"sword-1"}`)); err != nil {
		t.Fatal(err)
	}
	id = tradeID(t, step(g), "a", "b")
	ev := begin(t, g, "b", "ev-1", command(t, g, game.ActionAccept, `{"tradeId":"`+id+`"}`))
	if _, a := ev.Epochs["a"]; !a || len(ev.Epochs) != 2 || ev.Epochs["b"] != 0 {
		t.Fatalf("trade epochs %v: both parties' leases must be checked", ev.Epochs)
	}
	wantCode(t, refused(g, "b", command(t, g, game.ActionDecline, `{"tradeId":"`+id+`"}`)), game.CodeTradePending)
	if _, err := settle(g, "ev-1", apierr.Errorf(apierr.EMAPUNAVAILABLE, "away")); apierr.Code(err) != apierr.EMAPUNAVAILABLE {
		t.Fatal(err)
	}
	if d := named(step(g), "trade_declined"); len(d) != 1 || d[0]["data"].(map[string]any)["code"] != apierr.EMAPUNAVAILABLE {
		t.Fatalf("trade_declined %v", d)
	}
	if _, ok := g.Inventory("a").Find("sword-1"); !ok || len(g.Inventory("b").Entries) != 0 {
		t.Fatal("a refused trade moved the item")
	}

	// Accepted and durable: the item moves from a to b, once.
	if err := refused(g, "a", command(t, g, game.ActionOffer, `{"toCharacterId":"b","itemId":"sword-1"}`)); err != nil {
		t.Fatal(err)
	}
	id = tradeID(t, step(g), "a", "b")
	d := decoded(t, begin(t, g, "b", "ev-2", command(t, g, game.ActionAccept, `{"tradeId":"`+id+`"}`)))
	if d.Kind != items.KindTrade || d.From.CharacterID != "a" || d.To.CharacterID != "b" {
		t.Fatalf("trade event %+v", d)
	}
	out, err := settle(g, "ev-2", nil)
	if err != nil || !strings.Contains(string(out.Frame), `"item_traded"`) {
		t.Fatalf("settle: %s %v", out.Frame, err)
	}
	evs := step(g)
	ia, _ := inventoryOf(t, evs, "a")
	ib, _ := inventoryOf(t, evs, "b")
	if len(ia.Entries) != 1 || len(ib.Entries) != 1 || ib.Entries[0].ItemID != "sword-1" {
		t.Fatalf("inventories after the trade: a %+v, b %+v", ia, ib)
	}
	_, err = tryBegin(g, "b", "x", command(t, g, game.ActionAccept, `{"tradeId":"`+id+`"}`))
	wantCode(t, err, game.CodeTradeNotFound)
}

func TestGame_TradeEnds(t *testing.T) {
	g := mustItemGame(t)
	spot := g.ItemSeed()[4]
	spawnAt(t, g, "a", spot, 3)
	spawnAt(t, g, "b", spot, 5)
	g.Carry("a", []items.Item{held("coins", "coin", 9, "a")})
	full := []items.Item{}
	for i := range items.DefaultBackpackSlots {
		full = append(full, held("apple-"+string(rune('a'+i)), "apple", 1, "b"))
	}

	// Expiry: an unanswered offer ends after TradeExpiryTicks.
	if err := refused(g, "a", command(t, g, game.ActionOffer, `{"toCharacterId":"b","itemId":"coins"}`)); err != nil {
		t.Fatal(err)
	}
	id := tradeID(t, step(g), "a", "b")
	var declined []map[string]any
	for range game.TradeExpiryTicks {
		declined = append(declined, named(step(g), "trade_declined")...)
	}
	if len(declined) != 1 || declined[0]["data"].(map[string]any)["code"] != game.CodeTradeExpired {
		t.Fatalf("after expiry: %v", declined)
	}
	_, err := tryBegin(g, "b", "x", command(t, g, game.ActionAccept, `{"tradeId":"`+id+`"}`))
	wantCode(t, err, game.CodeTradeNotFound)

	// Withdrawn by the offerer.
	if err := refused(g, "a", command(t, g, game.ActionOffer, `{"toCharacterId":"b","itemId":"coins"}`)); err != nil {
		t.Fatal(err)
	}
	id = tradeID(t, step(g), "a", "b")
	if err := refused(g, "a", command(t, g, game.ActionDecline, `{"tradeId":"`+id+`"}`)); err != nil {
		t.Fatal(err)
	}
	if d := named(step(g), "trade_declined"); len(d) != 1 || d[0]["data"].(map[string]any)["code"] != game.CodeTradeWithdrawn {
		t.Fatalf("withdrawn: %v", d)
	}

	// A party leaves: the offer ends and the item is free.
	if err := refused(g, "a", command(t, g, game.ActionOffer, `{"toCharacterId":"b","itemId":"coins"}`)); err != nil {
		t.Fatal(err)
	}
	tradeID(t, step(g), "a", "b")
	g.Leave("b")
	if d := named(step(g), "trade_declined"); len(d) != 1 || d[0]["data"].(map[string]any)["code"] != game.CodeTradeAbsent {
		t.Fatalf("partner left: %v", d)
	}
	spawnAt(t, g, "b", spot, 5)
	g.Carry("b", full)
	// A full inventory cannot receive.
	wantCode(t, refused(g, "a", command(t, g, game.ActionOffer, `{"toCharacterId":"b","itemId":"coins"}`)), items.CodeInventoryFull)
	if _, err := tryBegin(g, "a", "ev", command(t, g, game.ActionDrop, `{"itemId":"coins"}`)); err != nil {
		t.Fatalf("the item stayed locked after its offer ended: %v", err)
	}
}

func TestGame_ItemPayloadsStrict(t *testing.T) {
	g := mustItemGame(t)
	for _, tc := range []struct{ action, payload string }{
		{game.ActionDrop, `{"itemId":"x","quantity":-1}`},
		{game.ActionDrop, `{"itemId":"x","extra":1}`},
		{game.ActionOffer, `{"itemId":"x"}`},
		{game.ActionAccept, `{}`},
		{game.ActionDecline, `{"tradeId":""}`},
		{game.ActionConsume, `{"itemId":"a b"}`},
		{game.ActionPickup, `{"itemId":"x"} trailing`},
	} {
		if _, err := g.Decode(game.FeatureItems, tc.action, json.RawMessage(tc.payload)); apierr.Code(err) != "bad_payload" {
			t.Errorf("%s %s: %v, want bad_payload", tc.action, tc.payload, err)
		}
	}
}
