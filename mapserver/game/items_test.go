package game_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/sim"
)

// mustItemGame is a game of the default map with its generated items loaded as an
// orchestrator that knew none of them would answer.
func mustItemGame(t *testing.T) *game.Game {
	t.Helper()
	g, _ := mustNewGame(t)
	g.LoadItems(g.ItemSeed())
	return g
}

func TestGame_ItemPlacementIsDeterministic(t *testing.T) {
	a, _ := mustNewGame(t)
	b, _ := mustNewGame(t)
	seed := a.ItemSeed()
	// The default map: 200 interactables per km² over 2 km × 2 km.
	if len(seed) != 800 {
		t.Fatalf("generated %d items, want 800", len(seed))
	}
	if fmt.Sprint(seed) != fmt.Sprint(b.ItemSeed()) {
		t.Fatal("the same map config generated different items")
	}
	led := items.NewMemLedger(nil, nil)
	for _, it := range seed {
		// Every generated item is one the orchestrator accepts as a seed.
		if known, err := items.Spawn(items.DefaultCatalog(), led, "forest-1", it); err != nil || known {
			t.Fatalf("seed item %+v: known %v, %v", it, known, err)
		}
		led.Store(items.Outcome{Items: []items.Item{it}})
	}
	cfg, _ := mapgen.Resolve("forest-1", mapgen.DefaultMapID, nil)
	cfg.Seed++
	w, err := mapgen.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := game.New(w, cfg, 30)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seed) == fmt.Sprint(c.ItemSeed()) {
		t.Fatal("another seed generated the same items")
	}
}

func TestGame_LoadItemsPlacesOnlyWhatLiesHere(t *testing.T) {
	g, _ := mustNewGame(t)
	seed := g.ItemSeed()
	taken := seed[0]
	taken.Place = items.Place{CharacterID: "c9"}
	used := seed[1]
	used.State = items.StateDestroyed
	elsewhere := seed[2]
	elsewhere.Place.InstanceID = "forest-2"
	g.LoadItems(append([]items.Item{taken, used, elsewhere}, seed[3:]...))
	if n := g.Sim().ItemCount(); n != len(seed)-3 {
		t.Fatalf("%d items in the world, want %d", n, len(seed)-3)
	}
	for _, it := range seed[:3] {
		if _, _, ok := g.WorldItem(it.ID); ok {
			t.Fatalf("item %s placed though it does not lie here", it.ID)
		}
	}
	it, slot, ok := g.WorldItem(seed[3].ID)
	if !ok {
		t.Fatal("a live item of the instance is not placed")
	}
	e := g.Sim().Entities[slot]
	if e.Kind != sim.KindItem || e.Template == 0 || e.Pos.X != sim.FromCentimetres(it.Place.X) {
		t.Fatalf("item entity %+v", e)
	}
	// Loading again replaces, never adds.
	g.LoadItems(seed)
	if n := g.Sim().ItemCount(); n != len(seed) {
		t.Fatalf("%d items after a reload, want %d", n, len(seed))
	}
}

// spawnAt puts a character on the item's spot.
func spawnAt(t *testing.T, g *game.Game, id string, it items.Item, dxUnits float64) {
	t.Helper()
	st := &record.CharacterState{MapID: mapgen.DefaultMapID, X: float64(it.Place.X)/100 + dxUnits, Y: float64(it.Place.Y) / 100}
	if err := join(g, id, st); err != nil {
		t.Fatal(err)
	}
}

func pickup(t *testing.T, g *game.Game, id string) any {
	t.Helper()
	cmd, err := g.Decode(game.FeatureItems, game.ActionPickup, json.RawMessage(`{"itemId":"`+id+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if apierr.Code(err) != code {
		t.Fatalf("got %v, want %s", err, code)
	}
}

func TestGame_PickupPendingThenDurable(t *testing.T) {
	g := mustItemGame(t)
	it := g.ItemSeed()[5]
	spawnAt(t, g, "c1", it, 0)
	spawnAt(t, g, "c2", it, 1)
	spawnAt(t, g, "far", it, 30)

	_, err := tryBegin(g, "c1", "ev-x", pickup(t, g, "no-such-item"))
	wantCode(t, err, items.CodeNotFound)
	_, err = tryBegin(g, "far", "ev-x", pickup(t, g, it.ID))
	wantCode(t, err, game.CodeOutOfReach)

	ev, err := tryBegin(g, "c1", "ev-1", pickup(t, g, it.ID))
	if ev == nil || err != nil {
		t.Fatalf("pickup: %v", err)
	}
	p, err := items.DecodePayload(ev.Payload)
	if err != nil {
		t.Fatal(err)
	}
	full := items.Event{ID: ev.EventID, Kind: items.Kind(ev.Kind), InstanceID: ev.InstanceID, MapTick: ev.MapTick, Payload: p}
	if err := full.Validate(); err != nil || ev.EventID != "ev-1" || len(ev.Epochs) != 1 || ev.Epochs["c1"] != 0 || p.ItemID != it.ID || p.To.CharacterID != "c1" {
		t.Fatalf("event %+v payload %+v: %v", ev, p, err)
	}
	_, slot, _ := g.WorldItem(it.ID)
	if g.Sim().Entities[slot].State&sim.ItemPending == 0 {
		t.Fatal("the item is not pending while its event is in flight")
	}
	// Nobody else can take a pending item.
	_, err = tryBegin(g, "c2", "ev-2", pickup(t, g, it.ID))
	wantCode(t, err, game.CodeItemPending)

	// The orchestrator refuses: the item is free again, nobody holds it.
	if _, err := settle(g, "ev-1", apierr.Errorf(apierr.EMAPUNAVAILABLE, "away")); apierr.Code(err) != apierr.EMAPUNAVAILABLE {
		t.Fatalf("settle refusal: %v", err)
	}
	if g.Sim().Entities[slot].State&sim.ItemPending != 0 || len(g.Inventory("c1").Entries) != 0 {
		t.Fatal("a refused pickup changed something")
	}

	// The second player takes it; only the durable ack moves it.
	if _, err := tryBegin(g, "c2", "ev-3", pickup(t, g, it.ID)); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := g.WorldItem(it.ID); !ok {
		t.Fatal("the item left the world before the durable ack")
	}
	out, err := settle(g, "ev-3", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := g.WorldItem(it.ID); ok || g.Sim().ItemCount() != len(g.ItemSeed())-1 {
		t.Fatal("the picked item is still in the world")
	}
	if e, ok := g.Inventory("c2").Find(it.ID); !ok || e.Quantity != it.Quantity {
		t.Fatalf("inventory of c2: %v", g.Inventory("c2").Entries)
	}
	if !strings.Contains(string(out.Frame), `"item_picked"`) || len(out.CharacterIDs) != 3 {
		t.Fatalf("event %s to %v", out.Frame, out.CharacterIDs)
	}
	_, err = tryBegin(g, "c1", "ev-4", pickup(t, g, it.ID))
	wantCode(t, err, items.CodeNotFound)
}

func TestGame_PickupRefusals(t *testing.T) {
	g := mustItemGame(t)
	it := g.ItemSeed()[7]
	spawnAt(t, g, "c1", it, 0)
	inv := g.Inventory("c1")
	for i := range items.DefaultBackpackSlots {
		if err := inv.Add(items.DefaultCatalog(), items.Entry{ItemID: fmt.Sprintf("a%d", i), TemplateID: "apple", Quantity: 1, Compartment: items.Backpack}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := tryBegin(g, "c1", "ev-1", pickup(t, g, it.ID))
	wantCode(t, err, items.CodeInventoryFull)
	for _, bad := range []string{`{}`, `{"itemId":""}`, `[]`, `{"itemId":"a b"}`} {
		_, err := g.Decode(game.FeatureItems, game.ActionPickup, json.RawMessage(bad))
		wantCode(t, err, "bad_payload")
	}
	_, err = g.Decode(game.FeatureItems, "juggle", json.RawMessage(`{}`))
	wantCode(t, err, "unknown_command")
	if r, _ := try(g, "c1", []sim.Input{}); r.Critical != nil || r.Err != nil || !r.Quiet {
		t.Fatalf("movement answered %+v, want no event and no ack", r)
	}
}

func TestGame_PickupAckAfterTheCharacterLeft(t *testing.T) {
	g := mustItemGame(t)
	it := g.ItemSeed()[9]
	spawnAt(t, g, "c1", it, 0)
	if _, err := tryBegin(g, "c1", "ev-1", pickup(t, g, it.ID)); err != nil {
		t.Fatal(err)
	}
	g.Leave("c1")
	if _, err := settle(g, "ev-1", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := g.WorldItem(it.ID); ok {
		t.Fatal("a durably picked item stayed in the world")
	}
	if n := len(g.Inventory("c1").Entries); n != 0 {
		t.Fatalf("a character no longer here holds %d items on this map", n)
	}
}
