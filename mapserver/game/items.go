package game

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/itemgen"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// Item commands: `{"feature":"items","action":A,"payload":{...}}`, one file each
// (pickup.go, drop.go, trade.go, consume.go).
const (
	FeatureItems  = "items"
	ActionPickup  = "pickup"
	ActionDrop    = "drop"
	ActionOffer   = "offer"
	ActionAccept  = "accept"
	ActionDecline = "decline"
	ActionConsume = "consume"
)

// Codes of refused item commands, besides the item rules' own (item_not_found,
// item_quantity, item_not_consumable, inventory_full, too_heavy...).
const (
	// CodeOutOfReach: the item, or the trade partner, is too far from the character.
	CodeOutOfReach = "out_of_reach"
	// CodeItemPending: the item is locked: a change of its owner awaits the
	// orchestrator, or it is offered in a trade.
	CodeItemPending = "item_pending"
	// CodeTradeAbsent: the trade partner is not on this map (never was, or left).
	CodeTradeAbsent = "trade_absent"
	// CodeTradeNotFound: no open offer with that trade id concerns the character.
	CodeTradeNotFound = "trade_not_found"
	// CodeTradePending: the trade was accepted and awaits the orchestrator.
	CodeTradePending = "trade_pending"
)

// worldItem is an item lying in this instance: its ownership record and its slot.
type worldItem struct {
	item items.Item
	slot int32
}

// pendingAction is an item command whose critical event awaits the orchestrator.
type pendingAction struct {
	kind        items.Kind
	characterID string
	itemID      string
	templateID  string
	quantity    int64
	place       items.Place // a drop's landing place
	tradeID     string      // an accepted trade
}

// itemState is the game's item bookkeeping.
type itemState struct {
	catalog  *items.Catalog
	wireIDs  map[string]uint32 // template id → wire template number (1-based, catalog order)
	seed     []items.Item
	world    map[string]*worldItem // item id → item lying here
	inv      map[string]*items.Inventory
	pending  map[string]pendingAction // event id → the action it makes durable
	locked   map[string]string        // held item id → the event or trade that locks it
	trades   map[string]*trade        // trade id → open or accepted offer
	trade    uint64                   // trades offered so far, for ids
	instance string
	// dirty lists the characters whose inventory changed since the last Step.
	dirty []string
	// out holds item events raised outside Step (offers, declines, refused trades),
	// sent with the next Step's.
	out []gameapi.Note
}

func newItemState(cat *items.Catalog, instanceID string) itemState {
	s := itemState{
		catalog: cat, wireIDs: make(map[string]uint32), world: make(map[string]*worldItem),
		inv: make(map[string]*items.Inventory), pending: make(map[string]pendingAction), locked: make(map[string]string),
		trades: make(map[string]*trade), instance: instanceID,
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
	return itemgen.Generate(cfg, w, cols, cat)
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

// itemCommand is an item command payload being decoded; valid checks its ids and
// quantity.
type itemCommand interface{ valid() bool }

// decodeItems decodes an item command's payload: strictly (one object, no unknown
// field), with valid ids and no negative quantity.
func decodeItems(action string, payload json.RawMessage) (any, error) {
	var cmd itemCommand
	var shape string
	switch action {
	case ActionPickup:
		cmd, shape = &Pickup{}, `{"itemId"}`
	case ActionDrop:
		cmd, shape = &Drop{}, `{"itemId","quantity"?}`
	case ActionOffer:
		cmd, shape = &Offer{}, `{"toCharacterId","itemId","quantity"?}`
	case ActionAccept:
		cmd, shape = &Accept{}, `{"tradeId"}`
	case ActionDecline:
		cmd, shape = &Decline{}, `{"tradeId"}`
	case ActionConsume:
		cmd, shape = &Consume{}, `{"itemId"}`
	default:
		return nil, apierr.Errorf(wire.CodeUnknownCommand, "unknown command %.32q/%.32q", FeatureItems, action)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cmd); err != nil || dec.More() || !cmd.valid() {
		return nil, apierr.Errorf(wire.CodeBadPayload, "%s needs %s with valid ids and a positive quantity", action, shape)
	}
	return deref(cmd), nil
}

// deref returns the command a pointer decoded into, by value: what Command
// switches on.
func deref(cmd itemCommand) any {
	switch c := cmd.(type) {
	case *Pickup:
		return *c
	case *Drop:
		return *c
	case *Offer:
		return *c
	case *Accept:
		return *c
	case *Decline:
		return *c
	case *Consume:
		return *c
	}
	return cmd
}

// beginItem starts an item command that changes an owner (pickup, drop, an accepted
// trade, consume): after the map's own checks and the item rules (items.Apply on what
// the map knows), what it moves becomes pending (nobody can touch it) and the critical
// event to make durable is returned, with eventID as its id. Its Epochs name every
// character it involves, for the kit to fill in. An event that would give a guest an
// item, or take one from it, is refused (guest_no_items): the orchestrator keeps items
// for saved characters only and would refuse it, so the map sends nothing.
func (g *Game) beginItem(characterID, eventID string, cmd any) (*record.CriticalEvent, error) {
	var act pendingAction
	var payload items.Payload
	var err error
	switch c := cmd.(type) {
	case Pickup:
		act, payload, err = g.beginPickup(characterID, c)
	case Drop:
		act, payload, err = g.beginDrop(characterID, c)
	case Accept:
		act, payload, err = g.beginTrade(characterID, c)
	case Consume:
		act, payload, err = g.beginConsume(characterID, c)
	default:
		return nil, apierr.Errorf(wire.CodeUnknownCommand, "not an item command that changes an owner")
	}
	if err != nil {
		return nil, err
	}
	ev := items.Event{ID: eventID, Kind: act.kind, InstanceID: g.items.instance, MapTick: int64(g.state.Tick()), Payload: payload}
	if err := g.decide(ev); err != nil {
		return nil, err
	}
	epochs := make(map[string]int64)
	for _, id := range ev.Characters() {
		if g.guests[id] {
			return nil, apierr.Errorf(wire.CodeGuestNoItems, "%s", refusalText[wire.CodeGuestNoItems])
		}
		epochs[id] = 0
	}
	epochs[characterID] = 0
	if g.guests[characterID] {
		return nil, apierr.Errorf(wire.CodeGuestNoItems, "%s", refusalText[wire.CodeGuestNoItems])
	}
	g.lock(eventID, act)
	return &record.CriticalEvent{
		EventID: eventID, InstanceID: g.items.instance, Kind: string(act.kind), MapTick: ev.MapTick,
		Payload: payload.Encode(), Epochs: epochs,
	}, nil
}

// decide runs the item rules (the very ones the orchestrator runs before it makes the
// event durable) on what the map knows of the items ev moves, so that a player gets
// the rules' refusal at once.
func (g *Game) decide(ev items.Event) error {
	var known []items.Item
	for _, m := range ev.Moves() {
		if it, ok := g.itemAt(m.ItemID, m.From); ok {
			known = append(known, it)
		}
	}
	if _, err := items.Apply(g.items.catalog, items.NewMemLedger(known, nil), ev); err != nil {
		return refusal(err)
	}
	return nil
}

// itemAt returns the item id as the map knows it at from: lying in the world, or in the
// inventory of the character from names.
func (g *Game) itemAt(id string, from items.Place) (items.Item, bool) {
	if from.InWorld() {
		if wi := g.items.world[id]; wi != nil {
			return wi.item, true
		}
		return items.Item{}, false
	}
	if inv := g.items.inv[from.CharacterID]; inv != nil {
		if e, ok := inv.Find(id); ok {
			return items.Item{ID: e.ItemID, TemplateID: e.TemplateID, Quantity: e.Quantity, Place: from, State: items.StateActive}, true
		}
	}
	return items.Item{}, false
}

// lock marks what act moves as pending until Settle.
func (g *Game) lock(eventID string, act pendingAction) {
	g.items.pending[eventID] = act
	switch act.kind {
	case items.KindPickup:
		g.state.SetItemPending(g.items.world[act.itemID].slot, true)
		return
	case items.KindTrade:
		g.items.trades[act.tradeID].event = eventID
	}
	g.items.locked[act.itemID] = eventID
}

// settleItem ends the item command of event eventID with the orchestrator's answer:
// nil is the durable ack (the change happens on the map, and its gameplay event goes
// to the players who see it; the inventories it changed follow with the next Step); an
// error frees what was pending and is returned as the refusal to answer.
func (g *Game) settleItem(eventID string, answer error) (gameapi.Note, error) {
	act, ok := g.items.pending[eventID]
	if !ok {
		return gameapi.Note{}, apierr.Errorf(apierr.EINTERNAL, "unknown item event")
	}
	delete(g.items.pending, eventID)
	if act.kind != items.KindPickup && g.items.locked[act.itemID] == eventID {
		delete(g.items.locked, act.itemID)
	}
	switch act.kind {
	case items.KindPickup:
		return g.settlePickup(act, answer)
	case items.KindDrop:
		return g.settleDrop(act, answer)
	case items.KindTrade:
		return g.settleTrade(act, answer)
	case items.KindConsume:
		return g.settleConsume(act, answer)
	}
	return gameapi.Note{}, apierr.Errorf(apierr.EINTERNAL, "unknown item event kind")
}

// held returns the entry of itemID in a character's inventory, free to act on: not
// locked by an event in flight or an open offer. Refusals: item_not_found,
// item_pending.
func (g *Game) held(characterID, itemID string) (items.Entry, error) {
	e, ok := g.Inventory(characterID).Find(itemID)
	if !ok {
		return items.Entry{}, apierr.Errorf(items.CodeNotFound, "you hold no item %.64q", itemID)
	}
	if _, locked := g.items.locked[itemID]; locked {
		return items.Entry{}, apierr.Errorf(CodeItemPending, "that item is being traded or changing hands")
	}
	return e, nil
}

// wholeStack checks a command's quantity against the stack it names: 0 (omitted) or
// all of it. Moves take whole items (the item rules), so a part of a stack cannot be
// dropped or given.
func wholeStack(q int64, e items.Entry) (int64, error) {
	if q != 0 && q != e.Quantity {
		return 0, apierr.Errorf(items.CodeQuantity, "%s holds %d: only the whole stack moves", e.ItemID, e.Quantity)
	}
	return e.Quantity, nil
}

// within reports whether two positions are at most r quanta apart.
func within(a, b sim.Vec, r int64) bool {
	dx, dy := int64(a.X-b.X), int64(a.Y-b.Y)
	return dx*dx+dy*dy <= r*r
}

// pos returns a character's position.
func (g *Game) pos(characterID string) sim.Vec { return g.state.Entities[g.slots[characterID]].Pos }

// refusal turns an item rule's refusal into the public error the player gets.
func refusal(err error) error {
	code := items.CodeOf(err)
	if code == "" {
		return apierr.Errorf(apierr.EINTERNAL, "item rules: %v", err)
	}
	return apierr.Errorf(code, "%s", strings.TrimPrefix(err.Error(), code+": "))
}

// itemFrame encodes an item event for the players who see it.
func itemFrame(name string, data any) []byte {
	b, _ := json.Marshal(wire.Event{V: wire.Version, Kind: wire.KindEvent, Name: name, Data: data})
	return b
}

// entryOf is the backpack entry of an item.
func entryOf(it items.Item) items.Entry {
	return items.Entry{ItemID: it.ID, TemplateID: it.TemplateID, Quantity: it.Quantity, Compartment: items.Backpack}
}
