// Package items holds the item rules the map server and the orchestrator must agree on:
// the catalog of item templates, inventories with compartments, capacities and a weight
// limit (encumbrance), the critical item events (pickup, drop, trade, consume, recover)
// with the one function that decides what such an event may do to the ownership state,
// the critical-item policies and the deterministic recovery pass.
//
// The map server runs these rules before it sends an event (so a player gets a clear
// refusal at once) and the orchestrator runs the very same rules before it makes the
// event durable (so a map can never make an item out of nothing or duplicate one). The
// package is pure: no I/O, no goroutines, no wall clock, integer math only. It builds
// for GOOS=js GOARCH=wasm, because the browser predicts encumbered movement with it, and
// it imports nothing but the standard library.
package items

import (
	"fmt"
	"sort"
)

// Slot is an equipment slot, or "" for an item that cannot be worn or wielded.
type Slot string

// Equipment slots. Each is also an inventory compartment of capacity one.
const (
	SlotNone     Slot = ""
	SlotHead     Slot = "head"
	SlotBody     Slot = "body"
	SlotMainHand Slot = "main_hand"
	SlotOffHand  Slot = "off_hand"
)

// SkillRequirement gates equipping an item on a character skill level.
type SkillRequirement struct {
	Skill string `json:"skill"`
	Level int    `json:"level"`
}

// Template describes one kind of item. Item instances name their template by ID; the
// rules read weights, stacking and flags from here, never from the event, so a map
// cannot make a feather of an anvil.
type Template struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// WeightGrams is the weight of one unit.
	WeightGrams int64 `json:"weightGrams"`
	// MaxStack is how many units one item instance may hold: 1 for an item that does not
	// stack.
	MaxStack int64 `json:"maxStack"`
	// Consumable items can be used up (item_consume).
	Consumable bool `json:"consumable,omitempty"`
	// Slot is where the item is worn or wielded, SlotNone if nowhere.
	Slot Slot `json:"slot,omitempty"`
	// Requires gates equipping the item; nil means anyone may.
	Requires *SkillRequirement `json:"requires,omitempty"`
	// Critical items are the ones the map must never move without the orchestrator's
	// durable ack, and the only ones a critical-item policy may name.
	Critical bool `json:"critical,omitempty"`
	// Unique templates have at most one live item in the whole world.
	Unique bool `json:"unique,omitempty"`
}

// Stackable reports whether one item instance may hold more than one unit.
func (t Template) Stackable() bool { return t.MaxStack > 1 }

// Catalog is a read-only set of templates by id. Build it with NewCatalog.
type Catalog struct {
	byID map[string]Template
	ids  []string
}

// NewCatalog returns a catalog of ts. It fails on an empty or repeated id, a negative
// weight, a stack size below one, or a unique template that stacks.
func NewCatalog(ts ...Template) (*Catalog, error) {
	c := &Catalog{byID: make(map[string]Template, len(ts))}
	for _, t := range ts {
		switch {
		case !ValidID(t.ID):
			return nil, fmt.Errorf("template id %q is not a valid id", t.ID)
		case t.WeightGrams < 0:
			return nil, fmt.Errorf("template %q: negative weight", t.ID)
		case t.MaxStack < 1:
			return nil, fmt.Errorf("template %q: maxStack must be at least 1", t.ID)
		case t.Unique && t.MaxStack != 1:
			return nil, fmt.Errorf("template %q: a unique item cannot stack", t.ID)
		}
		if _, dup := c.byID[t.ID]; dup {
			return nil, fmt.Errorf("template %q listed twice", t.ID)
		}
		c.byID[t.ID] = t
		c.ids = append(c.ids, t.ID)
	}
	sort.Strings(c.ids)
	return c, nil
}

// Template returns the template with id.
func (c *Catalog) Template(id string) (Template, bool) {
	t, ok := c.byID[id]
	return t, ok
}

// IDs returns every template id, sorted.
func (c *Catalog) IDs() []string { return append([]string(nil), c.ids...) }

// DefaultTemplates is the reference game's item catalog: a few of each kind the rules
// distinguish (stackable, consumable, equipment with and without a skill gate, critical
// and unique items).
func DefaultTemplates() []Template {
	return []Template{
		{ID: "coin", Name: "Gold coin", WeightGrams: 10, MaxStack: 1000},
		{ID: "apple", Name: "Apple", WeightGrams: 150, MaxStack: 20, Consumable: true},
		{ID: "potion", Name: "Healing potion", WeightGrams: 300, MaxStack: 10, Consumable: true},
		{ID: "torch", Name: "Torch", WeightGrams: 800, MaxStack: 5},
		{ID: "sword", Name: "Iron sword", WeightGrams: 2500, MaxStack: 1, Slot: SlotMainHand,
			Requires: &SkillRequirement{Skill: "melee", Level: 1}},
		{ID: "shield", Name: "Wooden shield", WeightGrams: 3000, MaxStack: 1, Slot: SlotOffHand},
		{ID: "helmet", Name: "Leather cap", WeightGrams: 700, MaxStack: 1, Slot: SlotHead},
		{ID: "armor", Name: "Chain mail", WeightGrams: 9000, MaxStack: 1, Slot: SlotBody,
			Requires: &SkillRequirement{Skill: "endurance", Level: 2}},
		{ID: "gate-key", Name: "Gate key", WeightGrams: 50, MaxStack: 1, Critical: true},
		{ID: "relic-shard", Name: "Relic shard", WeightGrams: 200, MaxStack: 1, Critical: true, Consumable: true},
		{ID: "crown", Name: "The Old Crown", WeightGrams: 1200, MaxStack: 1, Slot: SlotHead,
			Requires: &SkillRequirement{Skill: "lore", Level: 3}, Critical: true, Unique: true},
		{ID: "ember", Name: "Undying ember", WeightGrams: 100, MaxStack: 1, Consumable: true, Critical: true, Unique: true},
	}
}

// DefaultCatalog returns the catalog of DefaultTemplates.
func DefaultCatalog() *Catalog {
	c, err := NewCatalog(DefaultTemplates()...)
	if err != nil {
		panic("items: default catalog: " + err.Error()) // a programming error caught by every test
	}
	return c
}

// MaxIDLen bounds item, template and character ids so that stores keep bounded keys.
const MaxIDLen = 200

// ValidID reports whether s is a valid item, template or character id: 1 to MaxIDLen
// bytes of printable ASCII without spaces, safe in logs and JSON as is.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
