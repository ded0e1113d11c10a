package items

import (
	"fmt"
	"slices"
)

// Compartment is a part of a character's inventory. The equipment slots are
// compartments of capacity one that take only items made for them.
type Compartment string

// Compartments of the reference game's inventory.
const (
	Backpack Compartment = "backpack"
	Belt     Compartment = "belt"
	Head     Compartment = Compartment(SlotHead)
	Body     Compartment = Compartment(SlotBody)
	MainHand Compartment = Compartment(SlotMainHand)
	OffHand  Compartment = Compartment(SlotOffHand)
)

// Codes of inventory refusals, answered to the player on the map's connection.
const (
	// CodeInventoryFull: the compartment has no free place for another item.
	CodeInventoryFull = "inventory_full"
	// CodeTooHeavy: the item would take the carried weight past the hard limit.
	CodeTooHeavy = "too_heavy"
	// CodeIllegalSlot: the item cannot go into that compartment (a sword on the head,
	// anything but a belt item on the belt).
	CodeIllegalSlot = "illegal_slot"
	// CodeSkillGate: the character's skill is below the item's requirement.
	CodeSkillGate = "skill_gate"
	// CodeItemNotFound: the inventory holds no such item (same code as the event rules).
	CodeItemNotFound = CodeNotFound
)

// Layout is the shape of an inventory: how many items each compartment holds and the
// weight limits. Weights past WeightLimitGrams slow the carrier (Encumbrance); past
// MaxWeightGrams nothing more can be added.
type Layout struct {
	Capacity         map[Compartment]int
	WeightLimitGrams int64
	MaxWeightGrams   int64
	// BeltMaxWeightGrams is the heaviest single unit the belt takes (potions, keys, not
	// armour).
	BeltMaxWeightGrams int64
}

// Default inventory limits of the reference game.
const (
	DefaultBackpackSlots     = 20
	DefaultBeltSlots         = 4
	DefaultWeightLimitGrams  = 25_000
	DefaultMaxWeightGrams    = 2 * DefaultWeightLimitGrams
	DefaultBeltMaxUnitWeight = 1_000
)

// DefaultLayout returns the reference game's inventory layout.
func DefaultLayout() Layout {
	return Layout{
		Capacity: map[Compartment]int{
			Backpack: DefaultBackpackSlots, Belt: DefaultBeltSlots,
			Head: 1, Body: 1, MainHand: 1, OffHand: 1,
		},
		WeightLimitGrams:   DefaultWeightLimitGrams,
		MaxWeightGrams:     DefaultMaxWeightGrams,
		BeltMaxWeightGrams: DefaultBeltMaxUnitWeight,
	}
}

// Speed multipliers of encumbrance, in permille of the unencumbered speed.
const (
	FullSpeedPermille = 1000
	MinSpeedPermille  = 250
)

// Encumbrance returns the movement speed multiplier, in permille, of a carrier of
// weightGrams under limitGrams: full speed up to the limit, then inversely proportional
// to the weight (twice the limit walks at half speed), never below MinSpeedPermille.
// Integer math only, so the map and the browser's prediction agree to the unit.
func Encumbrance(weightGrams, limitGrams int64) int32 {
	if weightGrams <= limitGrams || limitGrams <= 0 {
		return FullSpeedPermille
	}
	p := FullSpeedPermille * limitGrams / weightGrams
	return int32(max(p, MinSpeedPermille))
}

// Entry is one item in an inventory.
type Entry struct {
	ItemID      string      `json:"itemId"`
	TemplateID  string      `json:"templateId"`
	Quantity    int64       `json:"quantity"`
	Compartment Compartment `json:"compartment"`
}

// Inventory is one character's items by compartment. The zero value is unusable; build
// it with NewInventory. Entries stay ordered by item id, so two inventories with the
// same items compare and encode the same.
type Inventory struct {
	Layout  Layout
	Entries []Entry
}

// NewInventory returns an empty inventory of layout.
func NewInventory(layout Layout) *Inventory { return &Inventory{Layout: layout} }

// Find returns the entry of itemID.
func (inv *Inventory) Find(itemID string) (Entry, bool) {
	i, ok := inv.index(itemID)
	if !ok {
		return Entry{}, false
	}
	return inv.Entries[i], true
}

func (inv *Inventory) index(itemID string) (int, bool) {
	return slices.BinarySearchFunc(inv.Entries, itemID, func(e Entry, id string) int {
		switch {
		case e.ItemID < id:
			return -1
		case e.ItemID > id:
			return 1
		}
		return 0
	})
}

// Count returns how many items are in compartment c.
func (inv *Inventory) Count(c Compartment) int {
	n := 0
	for _, e := range inv.Entries {
		if e.Compartment == c {
			n++
		}
	}
	return n
}

// WeightGrams returns the total weight carried; items of unknown templates weigh nothing.
func (inv *Inventory) WeightGrams(cat *Catalog) int64 {
	var w int64
	for _, e := range inv.Entries {
		if t, ok := cat.Template(e.TemplateID); ok {
			w += t.WeightGrams * e.Quantity
		}
	}
	return w
}

// SpeedPermille returns the carrier's movement multiplier (Encumbrance of its weight).
func (inv *Inventory) SpeedPermille(cat *Catalog) int32 {
	return Encumbrance(inv.WeightGrams(cat), inv.Layout.WeightLimitGrams)
}

// CanAdd returns the refusal that adding e would meet, or nil: an unknown template, a
// compartment that does not take the item (CodeIllegalSlot), no free place
// (CodeInventoryFull), or too much weight (CodeTooHeavy). Equipment compartments take
// only items made for them; equip checks skills as well (Equip).
func (inv *Inventory) CanAdd(cat *Catalog, e Entry) error {
	t, ok := cat.Template(e.TemplateID)
	if !ok {
		return refusef(CodeUnknownTemplate, "unknown item template %q", e.TemplateID)
	}
	if _, held := inv.index(e.ItemID); held {
		return refusef(CodeExists, "item %q is already in the inventory", e.ItemID)
	}
	if e.Quantity < 1 || e.Quantity > t.MaxStack {
		return refusef(CodeQuantity, "quantity %d of %q is outside 1..%d", e.Quantity, t.ID, t.MaxStack)
	}
	capacity, known := inv.Layout.Capacity[e.Compartment]
	switch {
	case !known:
		return refusef(CodeIllegalSlot, "no compartment %q", e.Compartment)
	case isSlot(e.Compartment) && Slot(e.Compartment) != t.Slot:
		return refusef(CodeIllegalSlot, "%s cannot go in %s", t.Name, e.Compartment)
	case e.Compartment == Belt && t.WeightGrams > inv.Layout.BeltMaxWeightGrams:
		return refusef(CodeIllegalSlot, "%s is too heavy for the belt", t.Name)
	case inv.Count(e.Compartment) >= capacity:
		return refusef(CodeInventoryFull, "%s is full", e.Compartment)
	}
	if w := inv.WeightGrams(cat) + t.WeightGrams*e.Quantity; inv.Layout.MaxWeightGrams > 0 && w > inv.Layout.MaxWeightGrams {
		return refusef(CodeTooHeavy, "carrying %d g would pass the limit of %d g", w, inv.Layout.MaxWeightGrams)
	}
	return nil
}

// Add puts e into the inventory, or returns CanAdd's refusal and changes nothing.
func (inv *Inventory) Add(cat *Catalog, e Entry) error {
	if err := inv.CanAdd(cat, e); err != nil {
		return err
	}
	i, _ := inv.index(e.ItemID)
	inv.Entries = slices.Insert(inv.Entries, i, e)
	return nil
}

// Remove takes quantity units of itemID out (the whole entry at its quantity) and
// returns what is left of it. It returns CodeItemNotFound or CodeQuantity and changes
// nothing on a refusal.
func (inv *Inventory) Remove(itemID string, quantity int64) (left int64, err error) {
	i, ok := inv.index(itemID)
	if !ok {
		return 0, refusef(CodeItemNotFound, "item %q is not in the inventory", itemID)
	}
	e := &inv.Entries[i]
	if quantity < 1 || quantity > e.Quantity {
		return e.Quantity, refusef(CodeQuantity, "cannot take %d of %d", quantity, e.Quantity)
	}
	e.Quantity -= quantity
	left = e.Quantity
	if left == 0 {
		inv.Entries = slices.Delete(inv.Entries, i, i+1)
	}
	return left, nil
}

// Equip moves itemID into the equipment slot its template names, swapping whatever is
// there into the backpack. skills are the character's levels by skill name. Refusals:
// CodeItemNotFound, CodeIllegalSlot (the item is not equipment, or slot is not its
// slot), CodeSkillGate, CodeInventoryFull (no backpack room for the swapped item).
// Slot cooldowns (equip_locked) belong to the simulation, which knows the tick.
func (inv *Inventory) Equip(cat *Catalog, itemID string, slot Slot, skills map[string]int) error {
	i, ok := inv.index(itemID)
	if !ok {
		return refusef(CodeItemNotFound, "item %q is not in the inventory", itemID)
	}
	t, _ := cat.Template(inv.Entries[i].TemplateID)
	if t.Slot == SlotNone || t.Slot != slot {
		return refusef(CodeIllegalSlot, "%s cannot be equipped in %q", t.Name, slot)
	}
	if r := t.Requires; r != nil && skills[r.Skill] < r.Level {
		return refusef(CodeSkillGate, "%s needs %s %d", t.Name, r.Skill, r.Level)
	}
	if inv.Entries[i].Compartment == Compartment(slot) {
		return nil
	}
	for j := range inv.Entries {
		if j != i && inv.Entries[j].Compartment == Compartment(slot) {
			if inv.Count(Backpack) >= inv.Layout.Capacity[Backpack] && inv.Entries[i].Compartment != Backpack {
				return refusef(CodeInventoryFull, "no backpack room for the item in %s", slot)
			}
			inv.Entries[j].Compartment = Backpack
		}
	}
	inv.Entries[i].Compartment = Compartment(slot)
	return nil
}

// Unequip moves the item in slot into the backpack. Refusals: CodeItemNotFound (the
// slot is empty), CodeInventoryFull.
func (inv *Inventory) Unequip(slot Slot) error {
	for i := range inv.Entries {
		if inv.Entries[i].Compartment == Compartment(slot) {
			if inv.Count(Backpack) >= inv.Layout.Capacity[Backpack] {
				return refusef(CodeInventoryFull, "no backpack room")
			}
			inv.Entries[i].Compartment = Backpack
			return nil
		}
	}
	return refusef(CodeItemNotFound, "nothing equipped in %q", slot)
}

func isSlot(c Compartment) bool {
	switch Slot(c) {
	case SlotHead, SlotBody, SlotMainHand, SlotOffHand:
		return true
	}
	return false
}

// String describes an entry for messages and test failures.
func (e Entry) String() string {
	return fmt.Sprintf("%s(%s x%d in %s)", e.ItemID, e.TemplateID, e.Quantity, e.Compartment)
}
