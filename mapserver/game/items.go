package game

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/mapyard/mapyard/mapserver/items"
	"github.com/mapyard/mapyard/mapserver/loop"
	"github.com/mapyard/mapyard/mapserver/mapgen"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
	"github.com/mapyard/mapyard/orchestrator/apierr"
	"github.com/mapyard/mapyard/orchestrator/mapcontract"
)

// Item commands: `{"feature":"items","action":"pickup","payload":{"itemId":"..."}}`.
const (
	FeatureItems = "items"
	ActionPickup = "pickup"
)

// Codes of refused item commands, besides the item rules' own (item_not_found,
// inventory_full, too_heavy...).
const (
	// CodeOutOfReach: the item lies farther than Reach from the character.
	CodeOutOfReach = "out_of_reach"
	// CodeItemPending: another change of the item's owner awaits the orchestrator.
	CodeItemPending = "item_pending"
)

// Reach is how far from a character's centre an item may lie to be picked up: 2 units.
const Reach = 2 * sim.QuantaPerUnit

// itemStream selects the PCG stream of item placement, apart from the simulation's own.
const itemStream = 0x6974656d

// Pickup is a decoded pickup command.
type Pickup struct {
	ItemID string `json:"itemId"`
}

// worldItem is an item lying in this instance: its ownership record and its slot.
type worldItem struct {
	item items.Item
	slot int32
}

// pendingPickup is a pickup whose critical event awaits the orchestrator.
type pendingPickup struct {
	characterID string
	itemID      string
}

// itemState is the game's item bookkeeping.
type itemState struct {
	catalog  *items.Catalog
	wireIDs  map[string]uint32 // template id → wire template number (1-based, catalog order)
	seed     []items.Item
	world    map[string]*worldItem // item id → item lying here
	inv      map[string]*items.Inventory
	pickups  map[string]pendingPickup // event id → pickup
	instance string
	// dirty lists the characters whose inventory changed since the last Step.
	dirty []string
}

func newItemState(cat *items.Catalog, instanceID string) itemState {
	s := itemState{
		catalog: cat, wireIDs: make(map[string]uint32), world: make(map[string]*worldItem),
		inv: make(map[string]*items.Inventory), pickups: make(map[string]pendingPickup), instance: instanceID,
	}
	for i, id := range cat.IDs() {
		s.wireIDs[id] = uint32(i + 1)
	}
	return s
}

// GenerateItems returns the ordinary items the generator places in an instance:
// generationRules.interactableDensity per square kilometre of the bounds, each of a
// template that is neither critical nor unique, on walkable open ground, drawn from a
// generator seeded by the map seed. The ids are the instance id and a number, so the
// same instance generates the same ids on every start and the orchestrator recognises
// the ones it knows already.
func GenerateItems(cfg mapgen.MapConfig, w *mapgen.World, cols *sim.Colliders, cat *items.Catalog) []items.Item {
	area := int64(w.Width/sim.CentimetresPerUnit) * int64(w.Height/sim.CentimetresPerUnit)
	n := int(int64(cfg.GenerationRules.InteractableDensity) * area / 1_000_000)
	var kinds []items.Template
	for _, id := range cat.IDs() {
		if t, _ := cat.Template(id); !t.Critical && !t.Unique {
			kinds = append(kinds, t)
		}
	}
	if n <= 0 || len(kinds) == 0 || !items.ValidID(cfg.InstanceID) {
		return nil
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, itemStream))
	bw, bh := cols.Bounds()
	out := make([]items.Item, 0, n)
	for i := range n {
		var p sim.Vec
		for try := 0; try < 64; try++ {
			p = sim.Vec{X: int32(sim.BodyRadius + rng.IntN(int(bw-2*sim.BodyRadius))), Y: int32(sim.BodyRadius + rng.IntN(int(bh-2*sim.BodyRadius)))}
			if !cols.Blocked(p) && (w.Nav.CellSize <= 0 || w.Nav.WalkableAt(sim.ToCentimetres(p.X), sim.ToCentimetres(p.Y))) {
				break
			}
		}
		p = cols.NearestOpen(p)
		t := kinds[rng.IntN(len(kinds))]
		q := int64(1)
		if t.Stackable() {
			q = 1 + rng.Int64N(min(t.MaxStack, 10))
		}
		out = append(out, items.Item{
			ID: fmt.Sprintf("%s.item-%d", cfg.InstanceID, i), TemplateID: t.ID, Quantity: q, State: items.StateActive,
			Place: items.Place{InstanceID: cfg.InstanceID, X: sim.ToCentimetres(p.X), Y: sim.ToCentimetres(p.Y)},
		})
	}
	return out
}

// ItemSeed returns the items the generator placed in this instance, to seed at the
// orchestrator (POST /orch/instance-items). None of them is in the world until
// LoadItems says which still lie here.
func (g *Game) ItemSeed() []items.Item { return g.items.seed }

// LoadItems puts in the world the live items the orchestrator says lie in this
// instance, replacing any placed before: the ownership state a (re)started map
// rebuilds from, so an item a player took is never placed again.
func (g *Game) LoadItems(list []items.Item) {
	for id, wi := range g.items.world {
		g.state.RemoveItem(wi.slot)
		g.grid.Remove(wi.slot)
		delete(g.items.world, id)
	}
	for _, it := range list {
		tpl, known := g.items.wireIDs[it.TemplateID]
		if !it.Live() || !it.Place.InWorld() || it.Place.InstanceID != g.items.instance || !known {
			continue
		}
		slot, _ := g.state.AddItem(sim.Vec{X: sim.FromCentimetres(it.Place.X), Y: sim.FromCentimetres(it.Place.Y)}, tpl)
		g.items.world[it.ID] = &worldItem{item: it, slot: slot}
		e := g.state.Entities[slot]
		g.grid.Update(slot, e.Pos.X, e.Pos.Y)
	}
}

// Inventory returns a character's inventory (empty for one that holds nothing).
func (g *Game) Inventory(characterID string) *items.Inventory {
	inv := g.items.inv[characterID]
	if inv == nil {
		inv = items.NewInventory(items.DefaultLayout())
		g.items.inv[characterID] = inv
	}
	return inv
}

// WorldItem returns the item with id lying in the world, and its slot.
func (g *Game) WorldItem(id string) (items.Item, int32, bool) {
	wi := g.items.world[id]
	if wi == nil {
		return items.Item{}, -1, false
	}
	return wi.item, wi.slot, true
}

// decodeItems decodes an item command's payload.
func decodeItems(action string, payload json.RawMessage) (any, error) {
	if action != ActionPickup {
		return nil, apierr.Errorf(wire.CodeUnknownCommand, "unknown command %.32q/%.32q", FeatureItems, action)
	}
	var p Pickup
	if err := json.Unmarshal(payload, &p); err != nil || !items.ValidID(p.ItemID) {
		return nil, apierr.Errorf(wire.CodeBadPayload, "pickup needs {\"itemId\":\"...\"}")
	}
	return p, nil
}

// Begin starts a pickup: the item must lie in the world, not pending, within Reach, and
// fit the character's inventory. The item becomes pending (nobody else can take it)
// and the critical event to make durable is returned, with eventID as its id. Anything
// that is not an item command is not Begin's (ok false).
func (g *Game) Begin(characterID string, epoch int64, eventID string, cmd any) (*mapcontract.CriticalEvent, bool, error) {
	p, isPickup := cmd.(Pickup)
	if !isPickup {
		return nil, false, nil
	}
	slot, ok := g.slots[characterID]
	if !ok {
		return nil, true, apierr.Errorf(apierr.ENOTFOUND, "no such character")
	}
	wi := g.items.world[p.ItemID]
	if wi == nil {
		return nil, true, apierr.Errorf(items.CodeNotFound, "no item %.64q lies here", p.ItemID)
	}
	e := &g.state.Entities[wi.slot]
	if e.State&sim.ItemPending != 0 {
		return nil, true, apierr.Errorf(CodeItemPending, "someone is taking that item")
	}
	me := g.state.Entities[slot].Pos
	dx, dy := int64(me.X-e.Pos.X), int64(me.Y-e.Pos.Y)
	if dx*dx+dy*dy > Reach*Reach {
		return nil, true, apierr.Errorf(CodeOutOfReach, "the item is out of reach (%d units at most)", Reach/sim.QuantaPerUnit)
	}
	it := wi.item
	if err := g.Inventory(characterID).CanAdd(g.items.catalog, entryOf(it)); err != nil {
		return nil, true, apierr.Errorf(items.CodeOf(err), "%s", strings.TrimPrefix(err.Error(), items.CodeOf(err)+": "))
	}
	g.state.SetItemPending(wi.slot, true)
	g.items.pickups[eventID] = pendingPickup{characterID: characterID, itemID: it.ID}
	payload := items.Payload{Move: items.Move{
		ItemID: it.ID, TemplateID: it.TemplateID, Quantity: it.Quantity, From: it.Place, To: items.Place{CharacterID: characterID},
	}}
	return &mapcontract.CriticalEvent{
		EventID: eventID, InstanceID: g.items.instance, Kind: string(items.KindPickup), MapTick: int64(g.state.Tick()),
		Payload: payload.Encode(), Epochs: map[string]int64{characterID: epoch},
	}, true, nil
}

// Settle ends the pickup of event eventID with the orchestrator's answer: nil is the
// durable ack (the item leaves the world for the character's inventory, and the
// "item_picked" event goes to the players who saw it); an error leaves the item in the
// world, free again, and is returned as the refusal to answer.
func (g *Game) Settle(eventID string, answer error) (loop.Event, error) {
	pp, ok := g.items.pickups[eventID]
	if !ok {
		return loop.Event{}, apierr.Errorf(apierr.EINTERNAL, "unknown item event")
	}
	delete(g.items.pickups, eventID)
	wi := g.items.world[pp.itemID]
	if wi == nil {
		return loop.Event{}, apierr.Errorf(items.CodeNotFound, "the item is gone")
	}
	if answer != nil {
		g.state.SetItemPending(wi.slot, false)
		return loop.Event{}, answer
	}
	viewers := g.viewersOf(wi.slot)
	id := g.state.Entities[wi.slot].ID
	// The orchestrator made the move durable: the map follows it even if its own
	// inventory would disagree.
	// A character that left meanwhile gets it from the orchestrator where it is now.
	if _, here := g.slots[pp.characterID]; here {
		keep(g.Inventory(pp.characterID), g.items.catalog, entryOf(wi.item))
		g.touch(pp.characterID)
	}
	g.state.RemoveItem(wi.slot)
	g.grid.Remove(wi.slot)
	delete(g.items.world, pp.itemID)
	frame, _ := json.Marshal(wire.Event{V: wire.Version, Kind: wire.KindEvent, Name: "item_picked",
		Data: ItemPicked{ID: uint64(id), ItemID: wi.item.ID, TemplateID: wi.item.TemplateID, Quantity: wi.item.Quantity, CharacterID: pp.characterID}})
	return loop.Event{Frame: frame, Viewers: viewers}, nil
}

// ItemPicked is the Data of an "item_picked" event: the item entity ID (ItemID, of
// TemplateID, Quantity units) left the world for CharacterID's inventory.
type ItemPicked struct {
	ID          uint64 `json:"id"`
	ItemID      string `json:"itemId"`
	TemplateID  string `json:"templateId"`
	Quantity    int64  `json:"quantity"`
	CharacterID string `json:"characterId"`
}

// entryOf is the backpack entry of an item.
func entryOf(it items.Item) items.Entry {
	return items.Entry{ItemID: it.ID, TemplateID: it.TemplateID, Quantity: it.Quantity, Compartment: items.Backpack}
}
