package game_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// inventoryOf decodes the "inventory" event among evs sent to characterID; false when
// there is none.
func inventoryOf(t *testing.T, evs []gameapi.Note, characterID string) (game.InventoryData, bool) {
	t.Helper()
	for _, ev := range evs {
		var env struct {
			wire.Event
			Data game.InventoryData `json:"data"`
		}
		if err := json.Unmarshal(ev.Frame, &env); err != nil || env.Name != game.EventInventory {
			continue
		}
		if len(ev.CharacterIDs) != 1 || ev.CharacterIDs[0] != characterID {
			continue
		}
		return env.Data, true
	}
	return game.InventoryData{}, false
}

// heavyLoad is the items a character of c holds: n chain mails of 9 kg.
func heavyLoad(c string, n int) []items.Item {
	var out []items.Item
	for i := range n {
		out = append(out, items.Item{ID: fmt.Sprintf("mail-%d", i), TemplateID: "armor", Quantity: 1,
			Place: items.Place{CharacterID: c}, State: items.StateActive})
	}
	return out
}

func TestGame_CarryLoadsInventoryAndSpeed(t *testing.T) {
	g := mustItemGame(t)
	it := g.ItemSeed()[3]
	spawnAt(t, g, "c1", it, 0)
	spawnAt(t, g, "c2", it, 1)
	other := heavyLoad("c2", 1)
	used := heavyLoad("c1", 5)[4]
	used.ID, used.State = "used", items.StateDestroyed
	g.Carry("c1", append(heavyLoad("c1", 4), append(other, used)...))
	if n := len(g.Inventory("c1").Entries); n != 4 {
		t.Fatalf("c1 carries %d items, want its 4 live ones", n)
	}
	if _, sent := inventoryOf(t, step(g), "c1"); sent {
		t.Fatal("Carry sent an inventory event: the welcome's is the one")
	}
	var frame struct {
		Data game.InventoryData `json:"data"`
	}
	if err := json.Unmarshal(g.InventoryFrame("c1"), &frame); err != nil {
		t.Fatal(err)
	}
	d := frame.Data
	// 36 kg over a 25 kg limit: 1000·25/36 = 694 permille of 80 quanta/s = 55 quanta/s.
	if d.Weight != 36_000 || d.WeightLimit != items.DefaultWeightLimitGrams || d.Speed != 55.0/16 || len(d.Entries) != 4 {
		t.Fatalf("inventory %+v", d)
	}
	if err := json.Unmarshal(g.InventoryFrame("c2"), &frame); err != nil || frame.Data.Speed != 5 || len(frame.Data.Entries) != 0 {
		t.Fatalf("c2's inventory %s: %v", g.InventoryFrame("c2"), err)
	}
}

// TestGame_EncumbranceSlowsWalking walks a loaded and an unloaded character the same
// inputs: the loaded one covers exactly what sim.Replay at the event's speed predicts.
func TestGame_EncumbranceSlowsWalking(t *testing.T) {
	g := mustItemGame(t)
	it := g.ItemSeed()[3]
	spawnAt(t, g, "light", it, 0)
	spawnAt(t, g, "heavy", it, 0)
	g.Carry("heavy", heavyLoad("heavy", 5)) // 45 kg: 555 permille
	var frame struct {
		Data game.InventoryData `json:"data"`
	}
	if err := json.Unmarshal(g.InventoryFrame("heavy"), &frame); err != nil {
		t.Fatal(err)
	}
	d := frame.Data
	speed := int32(d.Speed * sim.QuantaPerUnit)
	if float64(speed) != d.Speed*sim.QuantaPerUnit || speed != 44 {
		t.Fatalf("speed %v units/s is not the expected 44 quanta/s", d.Speed)
	}
	start := map[string]sim.Vec{}
	slots := map[string]int32{}
	for _, c := range []string{"light", "heavy"} {
		slots[c], _ = g.Slot(c)
		start[c] = g.Sim().Entities[slots[c]].Pos
	}
	var in []sim.Input
	for s := range 30 {
		in = append(in, sim.Input{Seq: uint64(s + 1), DX: 1, DY: 0})
	}
	for _, one := range in {
		for _, c := range []string{"light", "heavy"} {
			if err := refused(g, c, []sim.Input{one}); err != nil {
				t.Fatal(err)
			}
		}
		step(g)
	}
	for c, want := range map[string]int32{"light": 80, "heavy": speed} {
		got := g.Sim().Entities[slots[c]].Pos
		pred, _ := sim.Replay(g.Sim().Colliders(), start[c], sim.Stride{}, in, want, 30)
		if got != pred {
			t.Fatalf("%s ended at %v, prediction at %d quanta/s says %v", c, got, want, pred)
		}
	}
	if a, b := g.Sim().Entities[slots["light"]].Pos.X-start["light"].X, g.Sim().Entities[slots["heavy"]].Pos.X-start["heavy"].X; b >= a {
		t.Fatalf("the loaded character walked %d quanta, the unloaded %d", b, a)
	}
}

func TestGame_PickupSendsInventory(t *testing.T) {
	g := mustItemGame(t)
	it := g.ItemSeed()[5]
	spawnAt(t, g, "c1", it, 0)
	step(g)
	if _, err := tryBegin(g, "c1", "ev-1", pickup(t, g, it.ID)); err != nil {
		t.Fatal(err)
	}
	if _, sent := inventoryOf(t, step(g), "c1"); sent {
		t.Fatal("an inventory event before the durable ack")
	}
	if _, err := settle(g, "ev-1", nil); err != nil {
		t.Fatal(err)
	}
	d, ok := inventoryOf(t, step(g), "c1")
	if !ok || len(d.Entries) != 1 || d.Entries[0].ItemID != it.ID || d.Entries[0].Quantity != it.Quantity {
		t.Fatalf("inventory after the pickup: %+v (%v)", d, ok)
	}
}
