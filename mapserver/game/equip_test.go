package game_test

import (
	"encoding/json"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// equipGame is a game with character c1 (melee 1, no endurance) holding a sword, a
// shield, a second shield, a helmet, an apple and chain mail in its backpack, and
// character c2 holding a helmet of its own.
func equipGame(t *testing.T) *game.Game {
	t.Helper()
	g, _ := mustNewGame(t)
	st := &record.CharacterState{MapID: mapgen.DefaultMapID, X: 500, Y: 600, Attributes: json.RawMessage(`{"skills":{"melee":1},"gold":7}`)}
	if err := join(g, "c1", st); err != nil {
		t.Fatal(err)
	}
	if err := join(g, "c2", &record.CharacterState{MapID: mapgen.DefaultMapID, X: 510, Y: 600}); err != nil {
		t.Fatal(err)
	}
	give(t, g, "c1", "sword-1", "sword", "shield-1", "shield", "shield-2", "shield", "helmet-1", "helmet", "apple-1", "apple", "armor-1", "armor")
	give(t, g, "c2", "helmet-2", "helmet")
	return g
}

// give puts (item id, template id) pairs into a character's backpack.
func give(t *testing.T, g *game.Game, characterID string, pairs ...string) {
	t.Helper()
	inv := g.Inventory(characterID)
	for i := 0; i < len(pairs); i += 2 {
		e := items.Entry{ItemID: pairs[i], TemplateID: pairs[i+1], Quantity: 1, Compartment: items.Backpack}
		if err := inv.Add(items.DefaultCatalog(), e); err != nil {
			t.Fatal(err)
		}
	}
}

// equipResult applies cmd as command seq of a character and decodes its answer: the
// "equip_result" event, sent instead of an ack, and whether the game asked the kit to
// push the character's state at once.
func equipResult(t *testing.T, g *game.Game, characterID string, seq uint64, cmd any) (game.EquipResult, bool) {
	t.Helper()
	out := &gameapi.Recorder{}
	r := g.Command(characterID, seq, cmd, out)
	if !r.Quiet || r.Err != nil || r.Critical != nil {
		t.Fatalf("%T answered %+v, want the game's own answer", cmd, r)
	}
	var frame []byte
	if len(out.Notes) > 0 {
		if n := out.Notes[0]; len(n.CharacterIDs) != 1 || n.CharacterIDs[0] != characterID {
			t.Fatalf("equip_result to %v", n.CharacterIDs)
		}
		frame = out.Notes[0].Frame
	}
	changed := len(out.Saves) == 1 && out.Saves[0] == characterID
	if frame == nil {
		if changed {
			t.Fatal("an ignored command reports a change")
		}
		return game.EquipResult{}, false
	}
	var ev struct {
		Kind, Name string
		Data       game.EquipResult
	}
	if err := json.Unmarshal(frame, &ev); err != nil || ev.Kind != "event" || ev.Name != game.EventEquipResult {
		t.Fatalf("frame %s: %v", frame, err)
	}
	if changed != ev.Data.Success {
		t.Fatalf("equip_result success %v, but saved %v: the kit pushes the state on a change", ev.Data.Success, changed)
	}
	return ev.Data, true
}

// compartment returns where a character keeps an item ("" if it does not hold it).
func compartment(g *game.Game, characterID, itemID string) items.Compartment {
	e, _ := g.Inventory(characterID).Find(itemID)
	return e.Compartment
}

func TestGame_EquipCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  any
		code string
	}{
		{"IllegalSlotUnknown", game.Equip{ItemID: "sword-1", Slot: "tail"}, items.CodeIllegalSlot},
		{"IllegalSlotWrongSlot", game.Equip{ItemID: "sword-1", Slot: items.SlotHead}, items.CodeIllegalSlot},
		{"IllegalSlotNotEquipment", game.Equip{ItemID: "apple-1", Slot: items.SlotMainHand}, items.CodeIllegalSlot},
		{"IllegalSlotUnequip", game.Unequip{Slot: "backpack"}, items.CodeIllegalSlot},
		{"SkillGate", game.Equip{ItemID: "armor-1", Slot: items.SlotBody}, items.CodeSkillGate},
		{"ItemNotFound", game.Equip{ItemID: "nothing-9", Slot: items.SlotHead}, items.CodeItemNotFound},
		{"ItemNotOwned", game.Equip{ItemID: "helmet-2", Slot: items.SlotHead}, items.CodeItemNotFound},
		{"UnequipEmptySlot", game.Unequip{Slot: items.SlotHead}, items.CodeItemNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := equipGame(t)
			before := append([]items.Entry(nil), g.Inventory("c1").Entries...)
			res, _ := equipResult(t, g, "c1", 1, tc.cmd)
			if res.Success || res.Code != tc.code || res.Message == "" || res.Seq != 1 {
				t.Fatalf("got %+v, want refusal %s", res, tc.code)
			}
			if got := g.Inventory("c1").Entries; len(got) != len(before) {
				t.Fatal("a refused command changed the inventory")
			}
			for i, e := range g.Inventory("c1").Entries {
				if e != before[i] {
					t.Fatalf("a refused command moved %v to %v", before[i], e)
				}
			}
			if compartment(g, "c2", "helmet-2") != items.Backpack {
				t.Fatal("another character's item moved")
			}
		})
	}
}

func TestGame_EquipAndUnequip(t *testing.T) {
	g := equipGame(t)
	res, _ := equipResult(t, g, "c1", 1, game.Equip{ItemID: "sword-1", Slot: items.SlotMainHand})
	if !res.Success || res.Operation != "equip" || res.Slot != items.SlotMainHand || res.Code != "" {
		t.Fatalf("equip: %+v", res)
	}
	if got := compartment(g, "c1", "sword-1"); got != items.MainHand {
		t.Fatalf("sword in %q", got)
	}
	res, _ = equipResult(t, g, "c1", 2, game.Equip{ItemID: "shield-1", Slot: items.SlotOffHand})
	if !res.Success {
		t.Fatalf("a second slot is not locked by the first: %+v", res)
	}

	t.Run("EquipLocked", func(t *testing.T) {
		res, _ := equipResult(t, g, "c1", 3, game.Unequip{Slot: items.SlotMainHand})
		if res.Success || res.Code != game.CodeEquipLocked {
			t.Fatalf("unequip at once: %+v", res)
		}
		for range game.EquipCooldownTicks - 1 {
			step(g)
		}
		if res, _ := equipResult(t, g, "c1", 4, game.Equip{ItemID: "shield-2", Slot: items.SlotOffHand}); res.Code != game.CodeEquipLocked {
			t.Fatalf("one tick before the cooldown ends: %+v", res)
		}
		step(g)
	})

	t.Run("SwapAfterCooldown", func(t *testing.T) {
		res, _ := equipResult(t, g, "c1", 5, game.Equip{ItemID: "shield-2", Slot: items.SlotOffHand})
		if !res.Success {
			t.Fatalf("swap: %+v", res)
		}
		if compartment(g, "c1", "shield-2") != items.OffHand || compartment(g, "c1", "shield-1") != items.Backpack {
			t.Fatal("the swapped shield did not go to the backpack")
		}
		res, _ = equipResult(t, g, "c1", 6, game.Unequip{Slot: items.SlotMainHand})
		if !res.Success || res.Operation != "unequip" || compartment(g, "c1", "sword-1") != items.Backpack {
			t.Fatalf("unequip: %+v", res)
		}
	})

	t.Run("InventoryFull", func(t *testing.T) {
		for i := range items.DefaultBackpackSlots - g.Inventory("c1").Count(items.Backpack) {
			give(t, g, "c1", "coin-"+string(rune('a'+i)), "coin")
		}
		for range game.EquipCooldownTicks {
			step(g)
		}
		res, _ := equipResult(t, g, "c1", 7, game.Unequip{Slot: items.SlotOffHand})
		if res.Success || res.Code != items.CodeInventoryFull || compartment(g, "c1", "shield-2") != items.OffHand {
			t.Fatalf("unequip into a full backpack: %+v", res)
		}
	})
}

func TestGame_EquipDuplicateSeqIgnored(t *testing.T) {
	g := equipGame(t)
	if res, _ := equipResult(t, g, "c1", 7, game.Equip{ItemID: "helmet-1", Slot: items.SlotHead}); !res.Success {
		t.Fatalf("equip: %+v", res)
	}
	for range game.EquipCooldownTicks {
		step(g)
	}
	// The same seq again, even as another command: nothing is applied, nothing answered.
	if res, answered := equipResult(t, g, "c1", 7, game.Unequip{Slot: items.SlotHead}); answered {
		t.Fatalf("a duplicate seq was answered: %+v", res)
	}
	if compartment(g, "c1", "helmet-1") != items.Head {
		t.Fatal("a duplicate seq was applied")
	}
	// Another character's seqs are its own.
	if res, _ := equipResult(t, g, "c2", 7, game.Equip{ItemID: "helmet-2", Slot: items.SlotHead}); !res.Success {
		t.Fatalf("c2's seq 7: %+v", res)
	}
	// A connection that takes the character over counts from 1 again.
	g.Presence("c1", gameapi.Fresh)
	if res, answered := equipResult(t, g, "c1", 7, game.Unequip{Slot: items.SlotHead}); !answered || !res.Success {
		t.Fatalf("seq 7 of a new session: %+v", res)
	}
	// The window is the last EquipSeqWindow seqs: older ones count as new again.
	for seq := uint64(100); seq < 100+game.EquipSeqWindow; seq++ {
		equipResult(t, g, "c1", seq, game.Unequip{Slot: "tail"})
	}
	if _, answered := equipResult(t, g, "c1", 7, game.Unequip{Slot: "tail"}); !answered {
		t.Fatal("a seq older than the window was ignored")
	}
	if _, answered := equipResult(t, g, "c1", 100+game.EquipSeqWindow-1, game.Unequip{Slot: "tail"}); answered {
		t.Fatal("a seq within the window was answered")
	}
}

func TestGame_EquipmentTravelsInState(t *testing.T) {
	g := equipGame(t)
	if st, _ := g.State("c1"); string(st.Attributes) != `{"skills":{"melee":1},"gold":7}` {
		t.Fatalf("attributes changed before any equipment command: %s", st.Attributes)
	}
	equipResult(t, g, "c1", 1, game.Equip{ItemID: "sword-1", Slot: items.SlotMainHand})
	equipResult(t, g, "c1", 2, game.Equip{ItemID: "helmet-1", Slot: items.SlotHead})
	st, _ := g.State("c1")
	var attrs struct {
		Skills    map[string]int
		Gold      int
		Equipment map[string]string
	}
	if err := json.Unmarshal(st.Attributes, &attrs); err != nil {
		t.Fatal(err)
	}
	if attrs.Gold != 7 || attrs.Skills["melee"] != 1 || len(attrs.Equipment) != 2 ||
		attrs.Equipment["main_hand"] != "sword-1" || attrs.Equipment["head"] != "helmet-1" {
		t.Fatalf("pushed attributes %s", st.Attributes)
	}

	// The character arrives elsewhere with that state; its inventory is rebuilt from
	// the orchestrator (every item in the backpack) and the equipment restored.
	h, _ := mustNewGame(t)
	st.Attributes = json.RawMessage(`{"skills":{"melee":1},"equipment":{"main_hand":"sword-1","head":"helmet-1","off_hand":"gone-1","body":"helmet-1"}}`)
	mine := func(id, tpl string) items.Item {
		return items.Item{ID: id, TemplateID: tpl, Quantity: 1, Place: items.Place{CharacterID: "c1"}, State: items.StateActive}
	}
	if err := join(h, "c1", &st, mine("sword-1", "sword"), mine("helmet-1", "helmet"), mine("shield-1", "shield")); err != nil {
		t.Fatal(err)
	}
	if compartment(h, "c1", "sword-1") != items.MainHand || compartment(h, "c1", "helmet-1") != items.Head ||
		compartment(h, "c1", "shield-1") != items.Backpack {
		t.Fatalf("restored inventory %v", h.Inventory("c1").Entries)
	}
	// Restoring places items without a command: the slots are not locked.
	if res, _ := equipResult(t, h, "c1", 1, game.Unequip{Slot: items.SlotHead}); !res.Success {
		t.Fatalf("unequip after a restore: %+v", res)
	}
}

func TestGame_DecodeEquipment(t *testing.T) {
	g, _ := mustNewGame(t)
	if c, err := g.Decode("equipment", "equip", json.RawMessage(`{"itemId":"sword-1","slot":"main_hand"}`)); err != nil || c != (game.Equip{ItemID: "sword-1", Slot: items.SlotMainHand}) {
		t.Fatalf("equip: %v %v", c, err)
	}
	if c, err := g.Decode("equipment", "unequip", json.RawMessage(`{"slot":"head"}`)); err != nil || c != (game.Unequip{Slot: items.SlotHead}) {
		t.Fatalf("unequip: %v %v", c, err)
	}
	for _, bad := range []struct{ action, payload string }{
		{"equip", `{"itemId":"sword-1"}`},
		{"equip", `{"slot":"head"}`},
		{"equip", `{"itemId":"sword-1","slot":"head","extra":1}`},
		{"unequip", `{}`},
		{"unequip", `[1]`},
	} {
		if _, err := g.Decode("equipment", bad.action, json.RawMessage(bad.payload)); apierr.Code(err) != wire.CodeBadPayload {
			t.Fatalf("%s %s: %v", bad.action, bad.payload, err)
		}
	}
	if _, err := g.Decode("equipment", "wield", json.RawMessage(`{}`)); apierr.Code(err) != wire.CodeUnknownCommand {
		t.Fatalf("unknown action: %v", err)
	}
}
