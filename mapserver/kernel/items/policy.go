package items

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// PolicyType says how a critical item is kept in the world.
type PolicyType string

// Policy types (seed 001's critical_item_policy).
const (
	// UniquePersistent: exactly one canonical item that must always exist. It cannot be
	// consumed; when it is missing, lost where nobody can reach it, or kept too long by
	// an inactive character, it returns to its first anchor.
	UniquePersistent PolicyType = "unique_persistent"
	// RegenerativeUnique: at most one canonical item at a time. It may be consumed; it
	// respawns at its first anchor CooldownTicks after it was used up.
	RegenerativeUnique PolicyType = "regenerative_unique"
	// InstanceQuota: one copy at each anchor (copy k has id CopyID(ItemID, k)); a copy
	// that is used up is topped up at its anchor CooldownTicks later.
	InstanceQuota PolicyType = "instance_quota"
)

// PolicyTypes lists every policy type.
func PolicyTypes() []PolicyType {
	return []PolicyType{UniquePersistent, RegenerativeUnique, InstanceQuota}
}

// Policy limits.
const (
	MaxAnchors      = 64
	MaxQuestGateLen = 200
)

// Policy is one row of the orchestrator's critical_item_policy table: which critical
// item it keeps, how, where it belongs (anchors: world places), and the tick counts of
// its recovery. Maps load the policies of their instance at start.
type Policy struct {
	// ItemID is the canonical item's id (the copies' prefix for InstanceQuota). It never
	// contains '#', which separates a copy's number.
	ItemID     string     `json:"itemId"`
	TemplateID string     `json:"templateId"`
	Type       PolicyType `json:"policyType"`
	Anchors    []Place    `json:"anchorLocations"`
	// CooldownTicks is how long a used-up item stays missing before it respawns.
	CooldownTicks int64 `json:"cooldownTicks"`
	// OwnershipTimeoutTicks is how long an inactive character may keep the item before
	// it returns to its anchor; 0 never takes it back.
	OwnershipTimeoutTicks int64 `json:"ownershipTimeoutTicks,omitempty"`
	// QuestGate optionally names a quest flag the map checks before respawning the item
	// (opaque to the orchestrator, which only stores it).
	QuestGate string `json:"questGate,omitempty"`
}

// Copy is one item a policy keeps: its id and the anchor it belongs at.
type Copy struct {
	ItemID string
	Anchor Place
}

// CopyID is the id of copy k of an instance_quota item.
func CopyID(itemID string, k int) string { return itemID + "#" + strconv.Itoa(k) }

// Copies returns the items the policy keeps: the canonical item at the first anchor for
// the unique types, one copy per anchor for InstanceQuota.
func (p Policy) Copies() []Copy {
	if len(p.Anchors) == 0 {
		return nil
	}
	if p.Type != InstanceQuota {
		return []Copy{{ItemID: p.ItemID, Anchor: p.Anchors[0]}}
	}
	cs := make([]Copy, len(p.Anchors))
	for k, a := range p.Anchors {
		cs[k] = Copy{ItemID: CopyID(p.ItemID, k), Anchor: a}
	}
	return cs
}

// Copy returns the copy of the policy with itemID.
func (p Policy) Copy(itemID string) (Copy, bool) {
	for _, c := range p.Copies() {
		if c.ItemID == itemID {
			return c, true
		}
	}
	return Copy{}, false
}

// PolicyItemID returns the policy item id an item id belongs to: itself, or the prefix
// of a quota copy's id.
func PolicyItemID(itemID string) string {
	if i := strings.LastIndexByte(itemID, '#'); i > 0 {
		if _, err := strconv.Atoi(itemID[i+1:]); err == nil {
			return itemID[:i]
		}
	}
	return itemID
}

// Validate checks the policy against the catalog and returns an error that says what is
// wrong, in words an operator can act on: a valid item id without '#', a known critical
// template, a known type, 1 to MaxAnchors anchors each a world position, non-negative
// tick counts, a printable quest gate, and no unique template spread over several quota
// copies.
func (p Policy) Validate(cat *Catalog) error {
	t, known := cat.Template(p.TemplateID)
	switch {
	case !ValidID(p.ItemID) || strings.ContainsRune(p.ItemID, '#'):
		return fmt.Errorf("itemId must be 1 to %d printable characters without spaces or '#'", MaxIDLen)
	case !known:
		return fmt.Errorf("templateId %q is not in the item catalog (known: %s)", p.TemplateID, strings.Join(cat.IDs(), ", "))
	case !t.Critical:
		return fmt.Errorf("template %q is not a critical item; only critical items have policies", p.TemplateID)
	case !slices.Contains(PolicyTypes(), p.Type):
		return fmt.Errorf("policyType %q must be one of %s, %s or %s", p.Type, UniquePersistent, RegenerativeUnique, InstanceQuota)
	case len(p.Anchors) == 0 || len(p.Anchors) > MaxAnchors:
		return fmt.Errorf("anchorLocations must list 1 to %d world positions", MaxAnchors)
	case p.CooldownTicks < 0:
		return fmt.Errorf("cooldownTicks must not be negative")
	case p.OwnershipTimeoutTicks < 0:
		return fmt.Errorf("ownershipTimeoutTicks must not be negative")
	case len(p.QuestGate) > MaxQuestGateLen || (p.QuestGate != "" && !ValidID(p.QuestGate)):
		return fmt.Errorf("questGate must be at most %d printable characters without spaces", MaxQuestGateLen)
	case p.Type == InstanceQuota && t.Unique && len(p.Anchors) > 1:
		return fmt.Errorf("template %q is unique, so an instance_quota policy may have only one anchor", p.TemplateID)
	case p.Type == UniquePersistent && t.Consumable:
		return fmt.Errorf("template %q is consumable, so it cannot be unique_persistent", p.TemplateID)
	}
	for i, a := range p.Anchors {
		if !a.InWorld() || !ValidID(a.InstanceID) {
			return fmt.Errorf("anchorLocations[%d] must be a world position {\"instanceId\",\"x\",\"y\"}", i)
		}
	}
	return nil
}

// AnchoredIn reports whether the policy has an anchor in instanceID: whether that
// instance's recovery pass looks after (some of) its items.
func (p Policy) AnchoredIn(instanceID string) bool {
	for _, c := range p.Copies() {
		if c.Anchor.InstanceID == instanceID {
			return true
		}
	}
	return false
}
