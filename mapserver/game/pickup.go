package game

import (
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/sim"
)

// Reach is how far from a character's centre an item may lie to be picked up: 2 units.
const Reach = 2 * sim.QuantaPerUnit

// Pickup is a decoded items/pickup command: take ItemID from the ground.
type Pickup struct {
	ItemID string `json:"itemId"`
}

func (p *Pickup) valid() bool { return items.ValidID(p.ItemID) }

// beginPickup checks a pickup: the item must lie in the world, not pending, within
// Reach, and fit the character's inventory.
func (g *Game) beginPickup(characterID string, p Pickup) (pendingAction, items.Payload, error) {
	wi := g.items.world[p.ItemID]
	if wi == nil {
		return pendingAction{}, items.Payload{}, apierr.Errorf(items.CodeNotFound, "no item %.64q lies here", p.ItemID)
	}
	e := &g.state.Entities[wi.slot]
	if e.State&sim.ItemPending != 0 {
		return pendingAction{}, items.Payload{}, apierr.Errorf(CodeItemPending, "someone is taking that item")
	}
	if !within(g.pos(characterID), e.Pos, Reach) {
		return pendingAction{}, items.Payload{}, apierr.Errorf(CodeOutOfReach, "the item is out of reach (%d units at most)", Reach/sim.QuantaPerUnit)
	}
	it := wi.item
	if err := g.Inventory(characterID).CanAdd(g.items.catalog, entryOf(it)); err != nil {
		return pendingAction{}, items.Payload{}, refusal(err)
	}
	return pendingAction{kind: items.KindPickup, characterID: characterID, itemID: it.ID},
		items.Payload{Move: items.Move{ItemID: it.ID, TemplateID: it.TemplateID, Quantity: it.Quantity, From: it.Place, To: items.Place{CharacterID: characterID}}},
		nil
}

// settlePickup ends a pickup: on the durable ack the item leaves the world for the
// character's inventory (a character that left meanwhile gets it from the
// orchestrator where it is now) and "item_picked" goes to the players who saw it; a
// refusal leaves the item in the world, free again.
func (g *Game) settlePickup(act pendingAction, answer error) (gameapi.Note, error) {
	wi := g.items.world[act.itemID]
	if wi == nil {
		return gameapi.Note{}, apierr.Errorf(items.CodeNotFound, "the item is gone")
	}
	if answer != nil {
		g.state.SetItemPending(wi.slot, false)
		return gameapi.Note{}, answer
	}
	viewers := g.viewersOf(wi.slot)
	id := g.state.Entities[wi.slot].ID
	// The orchestrator made the move durable: the map follows it even if its own
	// inventory would disagree. A character that left meanwhile gets it from the
	// orchestrator where it is now; the recovery pass remembers who holds it.
	g.noteHeld(wi.item, act.characterID, int64(g.state.Tick()))
	if _, here := g.slots[act.characterID]; here {
		keep(g.Inventory(act.characterID), g.items.catalog, entryOf(wi.item))
		g.touch(act.characterID)
	}
	g.state.RemoveItem(wi.slot)
	g.grid.Remove(wi.slot)
	delete(g.items.world, act.itemID)
	return gameapi.Note{CharacterIDs: viewers, Frame: itemFrame("item_picked", ItemMoved{
		ID: uint64(id), ItemID: wi.item.ID, TemplateID: wi.item.TemplateID, Quantity: wi.item.Quantity, CharacterID: act.characterID,
	})}, nil
}

// ItemMoved is the Data of an "item_picked" event (the item entity ID, ItemID of
// TemplateID, Quantity units, left the world for CharacterID's inventory) and of an
// "item_dropped" event (it came from CharacterID's inventory into the world as entity
// ID).
type ItemMoved struct {
	ID          uint64 `json:"id"`
	ItemID      string `json:"itemId"`
	TemplateID  string `json:"templateId"`
	Quantity    int64  `json:"quantity"`
	CharacterID string `json:"characterId"`
}

// ItemPicked is the Data of an "item_picked" event.
type ItemPicked = ItemMoved
