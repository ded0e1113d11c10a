package game

import (
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
)

// Consume is a decoded items/consume command: use up one unit of ItemID.
type Consume struct {
	ItemID string `json:"itemId"`
}

func (c *Consume) valid() bool { return items.ValidID(c.ItemID) }

// ItemConsumed is the Data of an "item_consumed" event: CharacterID used up one unit
// of ItemID (of TemplateID); Left units remain (0: the item is gone).
type ItemConsumed struct {
	ItemID      string `json:"itemId"`
	TemplateID  string `json:"templateId"`
	CharacterID string `json:"characterId"`
	Left        int64  `json:"left"`
}

// beginConsume checks a consumption: the character holds the item, free; whether it
// can be used up is the item rules' (item_not_consumable).
func (g *Game) beginConsume(characterID string, c Consume) (pendingAction, items.Payload, error) {
	e, err := g.held(characterID, c.ItemID)
	if err != nil {
		return pendingAction{}, items.Payload{}, err
	}
	return pendingAction{kind: items.KindConsume, characterID: characterID, itemID: e.ItemID},
		items.Payload{Move: items.Move{ItemID: e.ItemID, TemplateID: e.TemplateID, Quantity: 1, From: items.Place{CharacterID: characterID}}},
		nil
}

// settleConsume ends a consumption: on the durable ack one unit leaves the inventory
// and "item_consumed" goes to the players who see the character.
func (g *Game) settleConsume(act pendingAction, answer error) (gameapi.Note, error) {
	if answer != nil {
		return gameapi.Note{}, answer
	}
	ev := ItemConsumed{ItemID: act.itemID, CharacterID: act.characterID}
	slot, here := g.slots[act.characterID]
	if !here {
		return gameapi.Note{}, nil
	}
	inv := g.Inventory(act.characterID)
	if e, ok := inv.Find(act.itemID); ok {
		ev.TemplateID = e.TemplateID
		ev.Left, _ = inv.Remove(act.itemID, 1)
		g.touch(act.characterID)
	}
	return gameapi.Note{CharacterIDs: g.viewersOf(slot), Frame: itemFrame("item_consumed", ev)}, nil
}
