package game

import (
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/sim"
)

// Drop is a decoded items/drop command: put ItemID down at the character's feet.
// Quantity 0 (omitted) means the whole stack, and only the whole stack moves.
type Drop struct {
	ItemID   string `json:"itemId"`
	Quantity int64  `json:"quantity,omitempty"`
}

func (d *Drop) valid() bool { return items.ValidID(d.ItemID) && d.Quantity >= 0 }

// beginDrop checks a drop: the character holds the item, free, whole. It lands on the
// nearest open ground at the character's feet (in whole centimetres, the place the
// orchestrator records and a restarted map places it at).
func (g *Game) beginDrop(characterID string, d Drop) (pendingAction, items.Payload, error) {
	e, err := g.held(characterID, d.ItemID)
	if err != nil {
		return pendingAction{}, items.Payload{}, err
	}
	q, err := wholeStack(d.Quantity, e)
	if err != nil {
		return pendingAction{}, items.Payload{}, err
	}
	at := g.state.Colliders().NearestOpen(g.pos(characterID))
	to := items.Place{InstanceID: g.items.instance, X: sim.ToCentimetres(at.X), Y: sim.ToCentimetres(at.Y)}
	return pendingAction{kind: items.KindDrop, characterID: characterID, itemID: e.ItemID, templateID: e.TemplateID, quantity: q, place: to},
		items.Payload{Move: items.Move{ItemID: e.ItemID, TemplateID: e.TemplateID, Quantity: q, From: items.Place{CharacterID: characterID}, To: to}},
		nil
}

// settleDrop ends a drop: on the durable ack the item leaves the inventory (if the
// character is still here) and lies in the world (also when its holder left meanwhile:
// the orchestrator says it lies here), and "item_dropped" goes to the
// players who see it; a refusal leaves it in the inventory, free again.
func (g *Game) settleDrop(act pendingAction, answer error) (gameapi.Note, error) {
	if answer != nil {
		return gameapi.Note{}, answer
	}
	it := items.Item{ID: act.itemID, TemplateID: act.templateID, Quantity: act.quantity, Place: act.place, State: items.StateActive}
	if inv := g.items.inv[act.characterID]; inv != nil {
		if _, err := inv.Remove(it.ID, it.Quantity); err == nil {
			g.touch(act.characterID)
		}
	}
	slot := g.place1(it)
	return gameapi.Note{CharacterIDs: g.viewersOf(slot), Frame: itemFrame("item_dropped", ItemMoved{
		ID: uint64(g.state.Entities[slot].ID), ItemID: it.ID, TemplateID: it.TemplateID, Quantity: it.Quantity, CharacterID: act.characterID,
	})}, nil
}

// place1 puts one live item in the world and returns its slot.
func (g *Game) place1(it items.Item) int32 {
	slot, _ := g.state.AddItem(sim.Vec{X: sim.FromCentimetres(it.Place.X), Y: sim.FromCentimetres(it.Place.Y)}, g.items.wireIDs[it.TemplateID])
	g.items.world[it.ID] = &worldItem{item: it, slot: slot}
	e := g.state.Entities[slot]
	g.grid.Update(slot, e.Pos.X, e.Pos.Y)
	return slot
}
