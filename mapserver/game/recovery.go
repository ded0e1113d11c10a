package game

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// EventItemRecovered names the event that shows a critical item the recovery pass put
// back at its anchor, sent to the players who see the anchor once the orchestrator made
// the recovery durable.
const EventItemRecovered = "item_recovered"

// Recovery tunables, in ticks so that the pass never reads a clock.
const (
	// DefaultRecoveryEveryTicks is how often the recovery pass runs (MAP_RECOVERY_EVERY_TICKS):
	// every 300 ticks, ten seconds at the default 30 Hz.
	DefaultRecoveryEveryTicks = 300
	// RecoveryBackoffPasses is how many passes skip an item after the orchestrator
	// refused its recovery: the map's picture of it was stale (an item that left with
	// its holder, a cooldown counted from another start of the map), and asking again
	// at every boundary would only repeat the refusal.
	RecoveryBackoffPasses = 10
)

// ItemRecovered is the Data of an "item_recovered" event: the item entity ID (ItemID of
// TemplateID) lies at its anchor again, for Trigger (missing, quota, invalid_place,
// ownership_timeout).
type ItemRecovered struct {
	ID         uint64 `json:"id"`
	ItemID     string `json:"itemId"`
	TemplateID string `json:"templateId"`
	Trigger    string `json:"trigger"`
}

// recoveryState is the game's critical-item bookkeeping: the policies anchored in this
// instance, what the map knows of the items they keep, and the recoveries in flight.
type recoveryState struct {
	every    uint64
	policies []items.Policy
	// known is the last state the map knows of each policy copy, by item id: loaded
	// from the orchestrator, then followed through what happens on the map.
	known map[string]items.Item
	// lost are copies the map saw leave with a holder it cannot name: it does not act
	// on them until the orchestrator tells it more (the next load).
	lost map[string]bool
	// seen maps a copy to the character here whose inventory the pass last found it
	// in: only then does its vanishing mean it was used up.
	seen map[string]string
	// inflight maps an item id to the recovery event awaiting the orchestrator.
	inflight map[string]string
	// actions are the recoveries by event id, until their answer.
	actions map[string]recoveryAction
	// retry is the first tick an item's recovery may be tried again after a refusal.
	retry map[string]uint64
}

// recoveryAction is a recovery in flight and the tick it was decided at.
type recoveryAction struct {
	items.Action
	tick int64
}

// LoadRecovery hands the game the critical-item policies anchored in its instance and
// the ownership state the orchestrator answered with them (POST /orch/instance-items:
// live and used-up rows of every copy the policies keep, wherever they are), and sets
// the maintenance boundary: the recovery pass runs after every Step whose tick is a
// multiple of everyTicks (0: never). Call it before the first Step, after LoadItems.
func (g *Game) LoadRecovery(policies []items.Policy, state []items.Item, everyTicks uint64) {
	r := &g.recovery
	*r = recoveryState{
		every: everyTicks, known: make(map[string]items.Item), lost: make(map[string]bool), seen: make(map[string]string),
		inflight: make(map[string]string), actions: make(map[string]recoveryAction), retry: make(map[string]uint64),
	}
	for _, p := range policies {
		if p.AnchoredIn(g.items.instance) && p.Validate(g.items.catalog) == nil {
			r.policies = append(r.policies, p)
		}
	}
	slices.SortFunc(r.policies, func(a, b items.Policy) int { return strings.Compare(a.ItemID, b.ItemID) })
	for _, it := range state {
		if r.keeps(it.ID) {
			r.known[it.ID] = it
		}
	}
}

// Policies returns the critical-item policies the recovery pass applies, by item id.
func (g *Game) Policies() []items.Policy { return slices.Clone(g.recovery.policies) }

// keeps reports whether a policy of the pass keeps itemID.
func (r *recoveryState) keeps(itemID string) bool {
	for _, p := range r.policies {
		if _, ok := p.Copy(itemID); ok {
			return true
		}
	}
	return false
}

// maintain runs the recovery pass when the tick is a maintenance boundary: it brings
// what the map knows of the policy copies up to date, decides the recoveries with
// items.Recover, and hands their critical events to the kit (Settle answers them).
func (g *Game) maintain(out gameapi.Out) {
	r := &g.recovery
	tick := g.state.Tick()
	if r.every == 0 || len(r.policies) == 0 || tick%r.every != 0 {
		return
	}
	g.followCopies(int64(tick))
	in := items.RecoveryInput{
		InstanceID: g.items.instance, Tick: int64(tick), Policies: r.policies, Catalog: g.items.catalog,
		Active: g.characters(), Reachable: g.reachable,
	}
	for _, it := range r.known {
		in.Items = append(in.Items, it)
	}
	for _, a := range items.Recover(in) {
		if _, busy := r.inflight[a.ItemID]; busy || r.lost[a.ItemID] || tick < r.retry[a.ItemID] || g.itemPending(a.ItemID) {
			continue
		}
		ev := a.Event(g.items.instance, int64(tick))
		r.inflight[a.ItemID] = ev.ID
		r.actions[ev.ID] = recoveryAction{Action: a, tick: ev.MapTick}
		if wi := g.items.world[a.ItemID]; wi != nil {
			g.state.SetItemPending(wi.slot, true) // nobody picks up what is being moved
		}
		out.Critical(record.CriticalEvent{
			EventID: ev.ID, InstanceID: ev.InstanceID, Kind: string(ev.Kind), MapTick: ev.MapTick, Payload: ev.Payload.Encode(),
		})
	}
}

// followCopies updates what the map knows of every policy copy from what happened on
// the map since the last pass: a copy lying here is where it lies; one in the inventory
// of a character here is held by it (since now, if it just changed hands); one that
// vanished from the inventory of a character still here was used up now; one that
// left the world here without a known holder is lost to the map's view.
func (g *Game) followCopies(tick int64) {
	r := &g.recovery
	holders := g.characters()
	for _, p := range r.policies {
		for _, cp := range p.Copies() {
			id := cp.ItemID
			old, known := r.known[id]
			switch wi, inv := g.items.world[id], g.holderOf(id, holders); {
			case wi != nil:
				r.known[id] = wi.item
				delete(r.lost, id)
			case inv != "":
				if !known || !old.Live() || old.Place.CharacterID != inv {
					e, _ := g.Inventory(inv).Find(id)
					old = items.Item{ID: id, TemplateID: e.TemplateID, Quantity: e.Quantity, State: items.StateActive,
						Place: items.Place{CharacterID: inv}, SinceTick: tick}
				}
				r.known[id] = old
				r.seen[id] = inv
				delete(r.lost, id)
			case !known || !old.Live():
			case old.Place.Held() && r.seen[id] == old.Place.CharacterID && slices.Contains(holders, old.Place.CharacterID):
				old.State, old.SinceTick = items.StateDestroyed, tick
				r.known[id] = old
				delete(r.seen, id)
			case old.Place.InWorld() && old.Place.InstanceID == g.items.instance:
				r.lost[id] = true
			}
		}
	}
}

// noteHeld records that a policy copy went from the world here to a character (a
// pickup made durable), so the pass knows its holder after the character left.
func (g *Game) noteHeld(it items.Item, characterID string, tick int64) {
	r := &g.recovery
	if r.known == nil || !r.keeps(it.ID) {
		return
	}
	it.Place, it.SinceTick = items.Place{CharacterID: characterID}, tick
	r.known[it.ID] = it
	delete(r.lost, it.ID)
}

// recovered ends the recovery of event eventID with the orchestrator's answer. On the
// durable ack the item leaves wherever the map still has it and lies at its anchor, and
// the "item_recovered" event goes to the players who see the anchor; a refusal frees
// what was pending and the item is left alone for RecoveryBackoffPasses passes.
func (g *Game) recovered(eventID string, answer error) gameapi.Note {
	r := &g.recovery
	a, ok := r.actions[eventID]
	if !ok {
		return gameapi.Note{}
	}
	delete(r.actions, eventID)
	delete(r.inflight, a.ItemID)
	if answer != nil {
		if wi := g.items.world[a.ItemID]; wi != nil {
			g.state.SetItemPending(wi.slot, false)
		}
		r.retry[a.ItemID] = g.state.Tick() + RecoveryBackoffPasses*max(r.every, 1)
		return gameapi.Note{}
	}
	if wi := g.items.world[a.ItemID]; wi != nil {
		g.state.RemoveItem(wi.slot)
		g.grid.Remove(wi.slot)
		delete(g.items.world, a.ItemID)
	}
	for _, id := range g.characters() {
		if inv := g.items.inv[id]; inv != nil {
			if e, held := inv.Find(a.ItemID); held {
				_, _ = inv.Remove(a.ItemID, e.Quantity) // the orchestrator moved it: the map follows
			}
		}
	}
	it := items.Item{ID: a.ItemID, TemplateID: a.TemplateID, Quantity: a.Quantity, Place: a.To,
		State: items.StateActive, SinceTick: a.tick}
	r.known[it.ID] = it
	delete(r.lost, it.ID)
	tpl, okTpl := g.items.wireIDs[it.TemplateID]
	if !okTpl {
		return gameapi.Note{}
	}
	slot, id := g.state.AddItem(sim.Vec{X: sim.FromCentimetres(a.To.X), Y: sim.FromCentimetres(a.To.Y)}, tpl)
	g.items.world[it.ID] = &worldItem{item: it, slot: slot}
	e := g.state.Entities[slot]
	g.grid.Update(slot, e.Pos.X, e.Pos.Y)
	frame, _ := json.Marshal(wire.Event{V: wire.Version, Kind: wire.KindEvent, Name: EventItemRecovered,
		Data: ItemRecovered{ID: uint64(id), ItemID: it.ID, TemplateID: it.TemplateID, Trigger: a.Trigger}})
	return gameapi.Note{Frame: frame, CharacterIDs: g.viewersOf(slot)}
}

// characters returns the characters in the world here, sorted.
func (g *Game) characters() []string {
	ids := make([]string, 0, len(g.slots))
	for id := range g.slots {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// holderOf returns the character among ids whose inventory holds itemID, or "".
func (g *Game) holderOf(itemID string, ids []string) string {
	for _, id := range ids {
		if inv := g.items.inv[id]; inv != nil {
			if _, ok := inv.Find(itemID); ok {
				return id
			}
		}
	}
	return ""
}

// itemPending reports whether an item awaits the orchestrator: lying here with a pickup
// in flight, or held here and locked by a drop, trade or consumption in flight or an
// open trade offer.
func (g *Game) itemPending(itemID string) bool {
	if _, locked := g.items.locked[itemID]; locked {
		return true
	}
	wi := g.items.world[itemID]
	return wi != nil && g.state.Entities[wi.slot].State&sim.ItemPending != 0
}

// reachable reports whether a player can stand at a world place of this instance:
// inside the bounds and not inside a static collider.
func (g *Game) reachable(p items.Place) bool {
	return !g.state.Colliders().Blocked(sim.Vec{X: sim.FromCentimetres(p.X), Y: sim.FromCentimetres(p.Y)})
}
