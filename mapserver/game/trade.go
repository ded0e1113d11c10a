package game

import (
	"fmt"
	"slices"

	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// Trades: a player offers an item it holds to another player on the same map within
// TradeReach; the offered item is locked (item_pending) until the offer ends. The
// receiver accepts (an item_trade critical event: the item changes hands only on the
// orchestrator's durable ack) or declines; the offerer may withdraw (decline) an offer
// not yet accepted; an offer not answered within TradeExpiryTicks expires, and one whose
// party leaves the map ends.
const (
	// TradeReach is how far apart the two players may stand, at the offer and at the
	// accept: twice Reach.
	TradeReach = 2 * Reach
	// TradeExpiryTicks is how long an offer waits for an answer: 30 s at 30 Hz.
	TradeExpiryTicks = 900
)

// Codes a "trade_declined" event carries when the receiver did not decline it itself.
const (
	// CodeTradeExpired: nobody answered the offer within TradeExpiryTicks.
	CodeTradeExpired = "trade_expired"
	// CodeTradeWithdrawn: the offerer took the offer back.
	CodeTradeWithdrawn = "trade_withdrawn"
)

// Offer is a decoded items/offer command: give ItemID (the whole stack; Quantity, if
// given, must be all of it) to ToCharacterID.
type Offer struct {
	ToCharacterID string `json:"toCharacterId"`
	ItemID        string `json:"itemId"`
	Quantity      int64  `json:"quantity,omitempty"`
}

func (o *Offer) valid() bool {
	return items.ValidID(o.ToCharacterID) && items.ValidID(o.ItemID) && o.Quantity >= 0
}

// Accept is a decoded items/accept command of the receiver of TradeID.
type Accept struct {
	TradeID string `json:"tradeId"`
}

func (a *Accept) valid() bool { return items.ValidID(a.TradeID) }

// Decline is a decoded items/decline command: the receiver refuses TradeID, or the
// offerer withdraws it.
type Decline struct {
	TradeID string `json:"tradeId"`
}

func (d *Decline) valid() bool { return items.ValidID(d.TradeID) }

// trade is an open offer, or an accepted one awaiting the orchestrator (event set).
type trade struct {
	id, from, to string
	entry        items.Entry
	expires      uint64 // the tick at which an unanswered offer expires
	event        string // the accepted trade's event id
}

// TradeOffered is the Data of a "trade_offered" event, sent to both parties.
type TradeOffered struct {
	TradeID         string `json:"tradeId"`
	FromCharacterID string `json:"fromCharacterId"`
	ToCharacterID   string `json:"toCharacterId"`
	ItemID          string `json:"itemId"`
	TemplateID      string `json:"templateId"`
	Quantity        int64  `json:"quantity"`
}

// ItemTraded is the Data of an "item_traded" event, sent to the players who see either
// party once the trade is durable.
type ItemTraded struct {
	TradeID         string `json:"tradeId"`
	ItemID          string `json:"itemId"`
	TemplateID      string `json:"templateId"`
	Quantity        int64  `json:"quantity"`
	FromCharacterID string `json:"fromCharacterId"`
	ToCharacterID   string `json:"toCharacterId"`
}

// TradeDeclined is the Data of a "trade_declined" event, sent to both parties: the
// offer ended without the item changing hands. Code is empty when the receiver
// declined, else why it ended (trade_expired, trade_withdrawn, trade_absent, or the
// refusal of the accepted trade's event).
type TradeDeclined struct {
	TradeID string `json:"tradeId"`
	Code    string `json:"code,omitempty"`
}

// offer opens a trade: the receiver is another character on this map within
// TradeReach, the offerer holds the item, free and whole, and the receiver's inventory
// can take it. The item is locked until the offer ends; both parties get
// "trade_offered".
func (g *Game) offer(from string, o Offer) error {
	if o.ToCharacterID == from {
		return apierr.Errorf(wire.CodeBadPayload, "a trade needs another player")
	}
	if _, here := g.slots[o.ToCharacterID]; !here {
		return apierr.Errorf(CodeTradeAbsent, "no player %.64q is on this map", o.ToCharacterID)
	}
	if !within(g.pos(from), g.pos(o.ToCharacterID), TradeReach) {
		return apierr.Errorf(CodeOutOfReach, "the other player is too far (%d units at most)", TradeReach/sim.QuantaPerUnit)
	}
	e, err := g.held(from, o.ItemID)
	if err != nil {
		return err
	}
	if _, err := wholeStack(o.Quantity, e); err != nil {
		return err
	}
	if err := g.Inventory(o.ToCharacterID).CanAdd(g.items.catalog, entryOf(items.Item{ID: e.ItemID, TemplateID: e.TemplateID, Quantity: e.Quantity})); err != nil {
		return refusal(err)
	}
	g.items.trade++
	t := &trade{
		id: fmt.Sprintf("trade-%d", g.items.trade), from: from, to: o.ToCharacterID, entry: e,
		expires: g.state.Tick() + TradeExpiryTicks,
	}
	g.items.trades[t.id] = t
	g.items.locked[e.ItemID] = t.id
	g.items.out = append(g.items.out, gameapi.Note{CharacterIDs: []string{t.from, t.to}, Frame: itemFrame("trade_offered", TradeOffered{
		TradeID: t.id, FromCharacterID: t.from, ToCharacterID: t.to, ItemID: e.ItemID, TemplateID: e.TemplateID, Quantity: e.Quantity,
	})})
	return nil
}

// openTrade returns the open offer tradeID concerns characterID in (as receiver only,
// unless either is true). Refusals: trade_not_found, trade_pending.
func (g *Game) openTrade(characterID, tradeID string, either bool) (*trade, error) {
	t := g.items.trades[tradeID]
	if t == nil || (t.to != characterID && !(either && t.from == characterID)) {
		return nil, apierr.Errorf(CodeTradeNotFound, "no open offer %.64q for you", tradeID)
	}
	if t.event != "" {
		return nil, apierr.Errorf(CodeTradePending, "the trade was accepted and awaits confirmation")
	}
	return t, nil
}

// beginTrade checks an accept: the offer is open and the receiver's, both parties are
// here and within TradeReach, and the receiver's inventory still takes the item.
func (g *Game) beginTrade(to string, a Accept) (pendingAction, items.Payload, error) {
	t, err := g.openTrade(to, a.TradeID, false)
	if err != nil {
		return pendingAction{}, items.Payload{}, err
	}
	if _, here := g.slots[t.from]; !here {
		return pendingAction{}, items.Payload{}, apierr.Errorf(CodeTradeAbsent, "the other player left")
	}
	if !within(g.pos(t.from), g.pos(to), TradeReach) {
		return pendingAction{}, items.Payload{}, apierr.Errorf(CodeOutOfReach, "the other player is too far (%d units at most)", TradeReach/sim.QuantaPerUnit)
	}
	e := t.entry
	if err := g.Inventory(to).CanAdd(g.items.catalog, entryOf(items.Item{ID: e.ItemID, TemplateID: e.TemplateID, Quantity: e.Quantity})); err != nil {
		return pendingAction{}, items.Payload{}, refusal(err)
	}
	return pendingAction{kind: items.KindTrade, characterID: to, itemID: e.ItemID, templateID: e.TemplateID, quantity: e.Quantity, tradeID: t.id},
		items.Payload{Move: items.Move{ItemID: e.ItemID, TemplateID: e.TemplateID, Quantity: e.Quantity,
			From: items.Place{CharacterID: t.from}, To: items.Place{CharacterID: to}}},
		nil
}

// settleTrade ends an accepted trade: on the durable ack the item leaves the offerer's
// inventory for the receiver's, both at once, and "item_traded" goes to the players
// who see either; a refusal ends the offer ("trade_declined" with the refusal's code)
// and nothing changes hands.
func (g *Game) settleTrade(act pendingAction, answer error) (gameapi.Note, error) {
	t := g.items.trades[act.tradeID]
	delete(g.items.trades, act.tradeID)
	if t == nil {
		return gameapi.Note{}, apierr.Errorf(apierr.EINTERNAL, "unknown trade")
	}
	if answer != nil {
		g.endTrade(t, apierr.Code(answer), false)
		return gameapi.Note{}, answer
	}
	e := t.entry
	if inv := g.items.inv[t.from]; inv != nil {
		if _, err := inv.Remove(e.ItemID, e.Quantity); err == nil {
			g.touch(t.from)
		}
	}
	if _, here := g.slots[t.to]; here {
		keep(g.Inventory(t.to), g.items.catalog, entryOf(items.Item{ID: e.ItemID, TemplateID: e.TemplateID, Quantity: e.Quantity}))
		g.touch(t.to)
	}
	var viewers []string
	for _, c := range []string{t.from, t.to} {
		if slot, here := g.slots[c]; here {
			for _, v := range g.viewersOf(slot) {
				if !slices.Contains(viewers, v) {
					viewers = append(viewers, v)
				}
			}
		}
	}
	return gameapi.Note{CharacterIDs: viewers, Frame: itemFrame("item_traded", ItemTraded{
		TradeID: t.id, ItemID: e.ItemID, TemplateID: e.TemplateID, Quantity: e.Quantity, FromCharacterID: t.from, ToCharacterID: t.to,
	})}, nil
}

// decline ends an open offer at the receiver's word (no code) or the offerer's
// (trade_withdrawn).
func (g *Game) decline(characterID string, d Decline) error {
	t, err := g.openTrade(characterID, d.TradeID, true)
	if err != nil {
		return err
	}
	code := ""
	if characterID == t.from {
		code = CodeTradeWithdrawn
	}
	delete(g.items.trades, t.id)
	g.endTrade(t, code, true)
	return nil
}

// endTrade unlocks a trade's item (when unlock; a settled event unlocked it already)
// and tells both parties it ended.
func (g *Game) endTrade(t *trade, code string, unlock bool) {
	if unlock && g.items.locked[t.entry.ItemID] == t.id {
		delete(g.items.locked, t.entry.ItemID)
	}
	g.items.out = append(g.items.out, gameapi.Note{CharacterIDs: []string{t.from, t.to}, Frame: itemFrame("trade_declined", TradeDeclined{TradeID: t.id, Code: code})})
}

// expireTrades ends the open offers whose time is up, and those a party left
// (characterID, when not empty), in trade id order.
func (g *Game) expireTrades(characterID string) {
	if len(g.items.trades) == 0 {
		return
	}
	ids := make([]string, 0, len(g.items.trades))
	for id := range g.items.trades {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		t := g.items.trades[id]
		if t.event != "" {
			continue // accepted: its event decides
		}
		switch {
		case characterID != "" && (t.from == characterID || t.to == characterID):
			delete(g.items.trades, id)
			g.endTrade(t, CodeTradeAbsent, true)
		case characterID == "" && g.state.Tick() >= t.expires:
			delete(g.items.trades, id)
			g.endTrade(t, CodeTradeExpired, true)
		}
	}
}
