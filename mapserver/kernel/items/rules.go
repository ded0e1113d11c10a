package items

import (
	"errors"
	"fmt"
)

// Codes of item rule refusals. They are public: the orchestrator answers a refused
// critical item event with one of them (HTTP 409, except CodeNotFound, 404, and
// CodeMalformed which it answers as bad_request), and the map tells the player. Every
// one begins with "item_".
const (
	// CodeMalformed: the event or payload is not well formed (unknown field or kind, a
	// missing id, a non-positive quantity).
	CodeMalformed = "item_malformed"
	// CodeIllegalMove: the places do not fit the kind (a pickup must come from the
	// sender's ground and reach a character, a drop the other way...).
	CodeIllegalMove = "item_illegal_move"
	// CodeUnknownTemplate: the template is not in the catalog.
	CodeUnknownTemplate = "item_unknown_template"
	// CodeNotFound: no live item has that id (never spawned, or used up).
	CodeNotFound = "item_not_found"
	// CodeTemplateMismatch: the item is of another template than the event says.
	CodeTemplateMismatch = "item_template_mismatch"
	// CodeWrongPlace: the item is not where the event says it comes from: held by
	// someone else, lying elsewhere, already moved.
	CodeWrongPlace = "item_wrong_place"
	// CodeQuantity: the quantity does not match the item (moves take whole items), is
	// more than it holds (consumption), or is outside its template's stack size.
	CodeQuantity = "item_quantity"
	// CodeNotConsumable: the template cannot be used up.
	CodeNotConsumable = "item_not_consumable"
	// CodePersistent: a unique_persistent item cannot be used up.
	CodePersistent = "item_persistent"
	// CodeUniqueExists: the item would be a second live item of a unique template.
	CodeUniqueExists = "item_unique_exists"
	// CodeExists: an item with that id exists already.
	CodeExists = "item_exists"
	// CodeNoPolicy: a recovery names an item no critical-item policy keeps.
	CodeNoPolicy = "item_no_policy"
	// CodeNotAnchor: a recovery puts the item elsewhere than its policy's anchor.
	CodeNotAnchor = "item_not_anchor"
	// CodeNotRecoverable: the recovery's trigger does not hold (the item exists, or its
	// holder's timeout has not passed, or the policy has no timeout).
	CodeNotRecoverable = "item_not_recoverable"
	// CodeCooldown: the used-up item's cooldown has not passed yet.
	CodeCooldown = "item_cooldown"
	// CodeCriticalSeed: a map may seed ordinary world items only; critical items enter
	// the world through their policy's recovery.
	CodeCriticalSeed = "item_critical_seed"
	// CodeHolderActive: a recovery would take an item from a character another map
	// instance holds (the orchestrator checks it against the authority lease).
	CodeHolderActive = "item_holder_active"
)

// CodePrefix begins every item rule refusal code, so a transport can classify them.
const CodePrefix = "item_"

// Refusal is an item rule's "no": a stable Code and a message for humans.
type Refusal struct {
	Code    string
	Message string
}

// Error implements error.
func (r *Refusal) Error() string { return r.Code + ": " + r.Message }

func refusef(code, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of the first *Refusal in err's chain, or "".
func CodeOf(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}

// State is whether an item still exists.
type State string

// Item states. A used-up item keeps its row, destroyed, so the recovery pass knows when
// (SinceTick) and where it went.
const (
	StateActive    State = "active"
	StateDestroyed State = "destroyed"
)

// Item is one item instance as the ownership state knows it.
type Item struct {
	ID         string `json:"itemId"`
	TemplateID string `json:"templateId"`
	Quantity   int64  `json:"quantity"`
	Place      Place  `json:"place"`
	State      State  `json:"state"`
	// SinceTick is the map tick of the item's last change (the event that moved,
	// spawned or used it up), in the sending instance's ticks.
	SinceTick int64 `json:"sinceTick"`
}

// Live reports whether the item exists.
func (it Item) Live() bool { return it.State == StateActive }

// Ledger is the ownership state a decision reads: the orchestrator's store inside the
// transaction that will record the event, or the map's memory. Errors are the store's
// own (a failed read), never refusals.
type Ledger interface {
	// Item returns the item with id, live or destroyed.
	Item(id string) (Item, bool, error)
	// LiveOfTemplate counts the live items of a template (for unique templates).
	LiveOfTemplate(templateID string) (int, error)
	// Policy returns the critical-item policy with itemID (see PolicyItemID).
	Policy(itemID string) (Policy, bool, error)
}

// Recovery is one append-only audit row of the recovery pass: at which tick which item
// was moved or respawned, why, from where (its last place, also for a used-up item)
// and to which anchor.
type Recovery struct {
	Tick    int64  `json:"tick"`
	ItemID  string `json:"itemId"`
	Trigger string `json:"trigger"`
	From    Place  `json:"from"`
	To      Place  `json:"to"`
}

// Outcome is what an allowed event does: the new state of every item it touches, in
// the order of its moves, and for a recovery the audit row to append.
type Outcome struct {
	Items    []Item
	Recovery *Recovery
}

// Apply decides whether ev may happen to the ownership state led holds and returns the
// new state of the items it touches. It refuses (a *Refusal, see the Code constants)
// what would make an item out of nothing, move an item its stated owner does not hold,
// change a quantity other than by consumption, use up what cannot be, or make a second
// live item of a unique template; it checks recoveries against their policy. It
// changes nothing itself; the caller stores the outcome, all of it or none. Errors that
// are not refusals come from the ledger.
func Apply(cat *Catalog, led Ledger, ev Event) (Outcome, error) {
	if err := ev.Validate(); err != nil {
		return Outcome{}, err
	}
	var out Outcome
	for _, m := range ev.Moves() {
		t, ok := cat.Template(m.TemplateID)
		if !ok {
			return Outcome{}, refusef(CodeUnknownTemplate, "unknown item template %q", m.TemplateID)
		} else if m.Quantity > t.MaxStack {
			return Outcome{}, refusef(CodeQuantity, "quantity %d of %q is more than its stack of %d", m.Quantity, t.ID, t.MaxStack)
		}
		var it Item
		var err error
		if ev.Kind == KindRecover {
			it, out.Recovery, err = recoverItem(led, ev, t)
		} else {
			it, err = moveItem(led, ev, m, t)
		}
		if err != nil {
			return Outcome{}, err
		}
		out.Items = append(out.Items, it)
	}
	return out, nil
}

// current returns the live item m names, checked against what the event says it is.
func current(led Ledger, m Move) (Item, error) {
	it, ok, err := led.Item(m.ItemID)
	if err != nil {
		return Item{}, err
	} else if !ok || !it.Live() {
		return Item{}, refusef(CodeNotFound, "no item %q", m.ItemID)
	} else if it.TemplateID != m.TemplateID {
		return Item{}, refusef(CodeTemplateMismatch, "item %q is a %s, not a %s", m.ItemID, it.TemplateID, m.TemplateID)
	} else if it.Place != m.From {
		return Item{}, refusef(CodeWrongPlace, "item %q is at %s, not at %s", m.ItemID, it.Place, m.From)
	}
	return it, nil
}

// moveItem applies one move of a pickup, drop, trade or consumption.
func moveItem(led Ledger, ev Event, m Move, t Template) (Item, error) {
	it, err := current(led, m)
	if err != nil {
		return Item{}, err
	}
	it.SinceTick = ev.MapTick
	if ev.Kind != KindConsume {
		if m.Quantity != it.Quantity {
			return Item{}, refusef(CodeQuantity, "item %q holds %d, not %d: moves take whole items", m.ItemID, it.Quantity, m.Quantity)
		}
		it.Place = m.To
		return it, nil
	}
	if !t.Consumable {
		return Item{}, refusef(CodeNotConsumable, "%s cannot be used up", t.Name)
	}
	if p, ok, err := led.Policy(PolicyItemID(m.ItemID)); err != nil {
		return Item{}, err
	} else if ok && p.Type == UniquePersistent {
		return Item{}, refusef(CodePersistent, "item %q must always exist", m.ItemID)
	}
	if m.Quantity > it.Quantity {
		return Item{}, refusef(CodeQuantity, "item %q holds %d, cannot use %d", m.ItemID, it.Quantity, m.Quantity)
	}
	if it.Quantity -= m.Quantity; it.Quantity == 0 {
		it.State = StateDestroyed // keeps its last place for the audit of its respawn
	}
	return it, nil
}

// recoverItem applies a recovery: its policy and anchor, its trigger against the item's
// state, and the audit row.
func recoverItem(led Ledger, ev Event, t Template) (Item, *Recovery, error) {
	m := ev.Move
	pol, ok, err := led.Policy(PolicyItemID(m.ItemID))
	if err != nil {
		return Item{}, nil, err
	} else if !ok {
		return Item{}, nil, refusef(CodeNoPolicy, "no critical-item policy keeps %q", m.ItemID)
	} else if pol.TemplateID != m.TemplateID {
		return Item{}, nil, refusef(CodeTemplateMismatch, "policy of %q keeps a %s, not a %s", m.ItemID, pol.TemplateID, m.TemplateID)
	}
	cp, ok := pol.Copy(m.ItemID)
	if !ok || cp.Anchor != m.To {
		return Item{}, nil, refusef(CodeNotAnchor, "item %q belongs at %s, not %s", m.ItemID, cp.Anchor, m.To)
	}
	if want := respawnTrigger(pol); (ev.Trigger == TriggerQuota || ev.Trigger == TriggerMissing) && ev.Trigger != want {
		return Item{}, nil, refusef(CodeNotRecoverable, "a missing %s item is restored with trigger %q", pol.Type, want)
	}
	cur, exists, err := led.Item(m.ItemID)
	if err != nil {
		return Item{}, nil, err
	}
	rec := &Recovery{Tick: ev.MapTick, ItemID: m.ItemID, Trigger: ev.Trigger, From: cur.Place, To: m.To}
	next := Item{ID: m.ItemID, TemplateID: m.TemplateID, Quantity: m.Quantity, Place: m.To, State: StateActive, SinceTick: ev.MapTick}
	switch ev.Trigger {
	case TriggerMissing, TriggerQuota:
		if exists && cur.Live() {
			return Item{}, nil, refusef(CodeNotRecoverable, "item %q exists at %s", m.ItemID, cur.Place)
		} else if exists && ev.MapTick < cur.SinceTick+pol.CooldownTicks {
			return Item{}, nil, refusef(CodeCooldown, "item %q respawns at tick %d", m.ItemID, cur.SinceTick+pol.CooldownTicks)
		} else if m.Quantity != 1 {
			return Item{}, nil, refusef(CodeQuantity, "a recovered item respawns as one unit")
		}
		if t.Unique {
			if n, err := led.LiveOfTemplate(t.ID); err != nil {
				return Item{}, nil, err
			} else if n > 0 {
				return Item{}, nil, refusef(CodeUniqueExists, "a %s exists already", t.Name)
			}
		}
		return next, rec, nil
	}
	// invalid_place and ownership_timeout move the live item as it is.
	if _, err := current(led, m); err != nil {
		return Item{}, nil, err
	} else if m.Quantity != cur.Quantity {
		return Item{}, nil, refusef(CodeQuantity, "item %q holds %d, not %d", m.ItemID, cur.Quantity, m.Quantity)
	}
	if ev.Trigger == TriggerOwnershipTimeout {
		if pol.OwnershipTimeoutTicks == 0 {
			return Item{}, nil, refusef(CodeNotRecoverable, "policy of %q has no ownership timeout", m.ItemID)
		} else if ev.MapTick < cur.SinceTick+pol.OwnershipTimeoutTicks {
			return Item{}, nil, refusef(CodeNotRecoverable, "item %q may be kept until tick %d", m.ItemID, cur.SinceTick+pol.OwnershipTimeoutTicks)
		}
	}
	return next, rec, nil
}

// respawnTrigger is the trigger that restores a missing item of pol.
func respawnTrigger(pol Policy) string {
	if pol.Type == InstanceQuota {
		return TriggerQuota
	}
	return TriggerMissing
}

// Spawn decides whether a map may seed it, an ordinary item its world generation put on
// the ground of instanceID, into the ownership state. It reports known=true, and
// nothing to store, when the ledger knows the id already: the stored state wins, which
// is what keeps a restarted map from duplicating an item a player picked up. Refusals:
// CodeMalformed, CodeIllegalMove (not on that instance's ground), CodeUnknownTemplate,
// CodeQuantity, CodeCriticalSeed, CodeUniqueExists.
func Spawn(cat *Catalog, led Ledger, instanceID string, it Item) (known bool, err error) {
	t, ok := cat.Template(it.TemplateID)
	switch {
	case !ValidID(it.ID) || !ValidID(it.TemplateID):
		return false, refusef(CodeMalformed, "a seeded item needs a valid itemId and templateId")
	case !it.Place.valid() || !it.Place.InWorld() || it.Place.InstanceID != instanceID:
		return false, refusef(CodeIllegalMove, "seeded item %q must lie in instance %q, not at %s", it.ID, instanceID, it.Place)
	case it.State != StateActive:
		return false, refusef(CodeMalformed, "seeded item %q must be %s", it.ID, StateActive)
	case !ok:
		return false, refusef(CodeUnknownTemplate, "unknown item template %q", it.TemplateID)
	case it.Quantity < 1 || it.Quantity > t.MaxStack:
		return false, refusef(CodeQuantity, "quantity %d of %q is outside 1..%d", it.Quantity, t.ID, t.MaxStack)
	case t.Critical:
		return false, refusef(CodeCriticalSeed, "%s is critical: it enters the world through its policy", t.Name)
	}
	if _, exists, err := led.Item(it.ID); err != nil || exists {
		return exists, err
	}
	if t.Unique {
		if n, err := led.LiveOfTemplate(t.ID); err != nil {
			return false, err
		} else if n > 0 {
			return false, refusef(CodeUniqueExists, "a %s exists already", t.Name)
		}
	}
	return false, nil
}
