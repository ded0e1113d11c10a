package items

import (
	"slices"
	"strconv"
	"strings"
)

// RecoveryInput is everything the recovery pass looks at. The map runs the pass at
// maintenance boundaries (every K ticks, never on a wall clock) over the ownership
// state it loaded from the orchestrator and kept since.
type RecoveryInput struct {
	// InstanceID is the map instance running the pass; it looks after the policy copies
	// anchored there only.
	InstanceID string
	// Tick is the current map tick.
	Tick int64
	// Items is the ownership state the map knows, live and destroyed rows; items no
	// policy keeps are ignored. Order does not matter.
	Items []Item
	// Policies are the critical-item policies; order does not matter.
	Policies []Policy
	// Active lists the characters playing in this instance now; a character not in it
	// is inactive. Order does not matter.
	Active []string
	// Reachable reports whether a player can reach a world place of this instance; nil
	// means every place is reachable.
	Reachable func(Place) bool
	// GateOpen reports whether a quest gate allows respawning; nil means every gate is
	// open. A closed gate delays respawns only, never a move back to an anchor.
	GateOpen func(gate string) bool
	// Catalog, when set, lets the pass skip the respawn of a unique template while
	// another live item of it is known (the orchestrator would refuse it).
	Catalog *Catalog
}

// Action is one recovery the pass decided: a move (from nowhere for a respawn) to the
// item's anchor, and why.
type Action struct {
	Move
	Trigger string
}

// Event returns the critical item_recover event of the action, with its deterministic
// id, so a retry after a crash reuses the id and the orchestrator applies it once.
func (a Action) Event(instanceID string, tick int64) Event {
	return Event{ID: RecoveryEventID(instanceID, tick, a.ItemID), Kind: KindRecover, InstanceID: instanceID,
		MapTick: tick, Payload: Payload{Move: a.Move, Trigger: a.Trigger}}
}

// RecoveryEventID is the event id of the recovery of itemID at tick in instanceID.
func RecoveryEventID(instanceID string, tick int64, itemID string) string {
	return strings.Join([]string{"recover", instanceID, strconv.FormatInt(tick, 10), itemID}, "/")
}

// Recover returns the recoveries due at in.Tick, sorted by item id, for every policy
// copy anchored in in.InstanceID:
//   - missing (or quota for instance_quota copies): the item does not exist; an item
//     that was used up respawns once its policy's cooldown has passed since, one that
//     never existed at once (its first placement);
//   - invalid_place: the item lies in this instance where in.Reachable says no player
//     can reach it;
//   - ownership_timeout: a character not in in.Active has held it for the policy's
//     ownership timeout or longer.
//
// It is a pure function of its input: the same state and policies give the same
// actions in the same order, whatever the order of the input slices.
func Recover(in RecoveryInput) []Action {
	byID := make(map[string]Item, len(in.Items))
	liveOf := map[string]int{}
	for _, it := range in.Items {
		byID[it.ID] = it
		if it.Live() {
			liveOf[it.TemplateID]++
		}
	}
	pols := slices.Clone(in.Policies)
	slices.SortFunc(pols, func(a, b Policy) int { return strings.Compare(a.ItemID, b.ItemID) })
	var out []Action
	for _, pol := range pols {
		for _, cp := range pol.Copies() {
			if cp.Anchor.InstanceID != in.InstanceID {
				continue
			}
			if a, ok := recoverCopy(in, pol, cp, byID, liveOf); ok {
				out = append(out, a)
			}
		}
	}
	slices.SortFunc(out, func(a, b Action) int { return strings.Compare(a.ItemID, b.ItemID) })
	return out
}

// recoverCopy decides the recovery of one policy copy, if any is due.
func recoverCopy(in RecoveryInput, pol Policy, cp Copy, byID map[string]Item, liveOf map[string]int) (Action, bool) {
	it, known := byID[cp.ItemID]
	switch {
	case !known || !it.Live():
		if known && in.Tick < it.SinceTick+pol.CooldownTicks {
			return Action{}, false
		}
		if pol.QuestGate != "" && in.GateOpen != nil && !in.GateOpen(pol.QuestGate) {
			return Action{}, false
		}
		if t, ok := in.catalogTemplate(pol.TemplateID); ok && t.Unique && liveOf[t.ID] > 0 {
			return Action{}, false
		}
		return Action{Trigger: respawnTrigger(pol), Move: Move{
			ItemID: cp.ItemID, TemplateID: pol.TemplateID, Quantity: 1, To: cp.Anchor}}, true
	case it.Place == cp.Anchor:
		return Action{}, false
	case it.Place.InWorld() && it.Place.InstanceID == in.InstanceID && in.Reachable != nil && !in.Reachable(it.Place):
		return Action{Trigger: TriggerInvalidPlace, Move: Move{
			ItemID: it.ID, TemplateID: it.TemplateID, Quantity: it.Quantity, From: it.Place, To: cp.Anchor}}, true
	case it.Place.Held() && pol.OwnershipTimeoutTicks > 0 && !slices.Contains(in.Active, it.Place.CharacterID) &&
		in.Tick >= it.SinceTick+pol.OwnershipTimeoutTicks:
		return Action{Trigger: TriggerOwnershipTimeout, Move: Move{
			ItemID: it.ID, TemplateID: it.TemplateID, Quantity: it.Quantity, From: it.Place, To: cp.Anchor}}, true
	}
	return Action{}, false
}

func (in RecoveryInput) catalogTemplate(id string) (Template, bool) {
	if in.Catalog == nil {
		return Template{}, false
	}
	return in.Catalog.Template(id)
}
