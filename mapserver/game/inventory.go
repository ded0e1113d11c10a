package game

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// EventInventory names the event that tells a player what it carries: sent to the owner
// only, right after its welcome and after every change of its inventory.
const EventInventory = "inventory"

// InventoryData is the Data of an "inventory" event: every item the character carries
// (ordered by item id), what it wears or wields by slot, the weight it carries and the
// weight past which it slows down (grams), and Speed, the units per second the server
// walks it with now. Speed is always a whole number of quanta per second divided by
// sim.QuantaPerUnit, so Speed × 16 is exactly the integer speed a client's prediction
// (sim.Replay, the module's replay) must use. Skills are the character's skill levels
// (its attributes' "skills"), against which an item's requirement gates equipping it
// (skill_gate): a client offers Equip only where it would succeed.
type InventoryData struct {
	Entries     []items.Entry     `json:"entries"`
	Equipment   map[string]string `json:"equipment"`
	Weight      int64             `json:"weight"`
	WeightLimit int64             `json:"weightLimit"`
	Speed       float64           `json:"speed"`
	Skills      map[string]int    `json:"skills"`
}

// carry gives an arriving character the items the orchestrator says it holds (POST
// /orch/character-items), replacing what the map kept for it, and sets the speed its
// load allows; its welcome is followed by InventoryFrame. Items not live or held by
// someone else are left out. The orchestrator's word wins over the inventory's limits:
// an item it says the character holds is kept even where the layout would refuse it.
func (g *Game) carry(characterID string, held []items.Item) {
	inv := items.NewInventory(items.DefaultLayout())
	for _, it := range held {
		if it.Live() && it.Place.Held() && it.Place.CharacterID == characterID {
			keep(inv, g.items.catalog, entryOf(it))
		}
	}
	g.items.inv[characterID] = inv
	g.restoreEquipment(characterID)
	if slot, here := g.slots[characterID]; here {
		g.state.SetSpeed(slot, g.speedOf(characterID)) // its welcome's inventory event tells it
	}
}

// keep adds e to inv, past the layout's limits if it must: a durable ownership change
// the map follows whatever its own checks would say. An item already there stays as is.
func keep(inv *items.Inventory, cat *items.Catalog, e items.Entry) {
	if _, held := inv.Find(e.ItemID); held {
		return
	}
	if inv.Add(cat, e) == nil {
		return
	}
	i, _ := slices.BinarySearchFunc(inv.Entries, e.ItemID, func(x items.Entry, id string) int { return strings.Compare(x.ItemID, id) })
	inv.Entries = slices.Insert(inv.Entries, i, e)
}

// touch records that a character's inventory changed: its speed follows its load at
// once, and the next Step sends it its "inventory" event.
func (g *Game) touch(characterID string) {
	slot, here := g.slots[characterID]
	if !here {
		return
	}
	g.state.SetSpeed(slot, g.speedOf(characterID))
	if !slices.Contains(g.items.dirty, characterID) {
		g.items.dirty = append(g.items.dirty, characterID)
	}
}

// speedOf is the speed, in quanta per second, a character's load allows.
func (g *Game) speedOf(characterID string) int32 {
	return sim.ScaledSpeed(g.state.Options().PlayerSpeed, g.Inventory(characterID).SpeedPermille(g.items.catalog))
}

// inventoryEvents sends, last in a Step, the item events of the tick: trade offers
// that expired, the events raised since the last Step outside it (offers, declines,
// refused trades), then the "inventory" events of the characters whose inventory
// changed, in the order they changed, and forgets them.
func (g *Game) inventoryEvents(out gameapi.Out) {
	g.expireTrades("")
	for _, n := range g.items.out {
		out.Notify(n.Frame, n.CharacterIDs)
	}
	clear(g.items.out)
	g.items.out = g.items.out[:0]
	for _, id := range g.items.dirty {
		if _, here := g.slots[id]; here {
			out.Notify(g.InventoryFrame(id), []string{id})
		}
	}
	g.items.dirty = g.items.dirty[:0]
}

// InventoryFrame returns the "inventory" event of a character, for its owner.
func (g *Game) InventoryFrame(characterID string) []byte {
	inv := g.Inventory(characterID)
	d := InventoryData{
		Entries: append([]items.Entry{}, inv.Entries...), Equipment: map[string]string{},
		Weight: inv.WeightGrams(g.items.catalog), WeightLimit: inv.Layout.WeightLimitGrams,
		Skills: g.skills(characterID),
	}
	if d.Skills == nil {
		d.Skills = map[string]int{}
	}
	for _, e := range inv.Entries {
		if e.Compartment != items.Backpack && e.Compartment != items.Belt {
			d.Equipment[string(e.Compartment)] = e.ItemID
		}
	}
	speed := g.speedOf(characterID)
	if slot, here := g.slots[characterID]; here {
		speed = g.state.PlayerSpeed(slot)
	}
	d.Speed = float64(speed) / sim.QuantaPerUnit
	b, _ := json.Marshal(wire.Event{V: wire.Version, Kind: wire.KindEvent, Name: EventInventory, Data: d})
	return b
}
