package items

import "sort"

// MemLedger is an ownership state held in memory: what a map keeps between the events
// it sends (loaded from the orchestrator at start), and what tests use. It is not safe
// for concurrent use; the map's tick goroutine owns it.
type MemLedger struct {
	items    map[string]Item
	policies map[string]Policy
}

var _ Ledger = (*MemLedger)(nil)

// NewMemLedger returns a ledger holding items and policies.
func NewMemLedger(items []Item, policies []Policy) *MemLedger {
	l := &MemLedger{items: make(map[string]Item, len(items)), policies: make(map[string]Policy, len(policies))}
	for _, it := range items {
		l.items[it.ID] = it
	}
	for _, p := range policies {
		l.policies[p.ItemID] = p
	}
	return l
}

// Item returns the item with id, live or destroyed.
func (l *MemLedger) Item(id string) (Item, bool, error) {
	it, ok := l.items[id]
	return it, ok, nil
}

// LiveOfTemplate counts the live items of a template.
func (l *MemLedger) LiveOfTemplate(templateID string) (int, error) {
	n := 0
	for _, it := range l.items {
		if it.TemplateID == templateID && it.Live() {
			n++
		}
	}
	return n, nil
}

// Policy returns the policy with itemID.
func (l *MemLedger) Policy(itemID string) (Policy, bool, error) {
	p, ok := l.policies[itemID]
	return p, ok, nil
}

// Store records an outcome's items.
func (l *MemLedger) Store(out Outcome) {
	for _, it := range out.Items {
		l.items[it.ID] = it
	}
}

// Apply decides ev with Apply and stores the outcome if it is allowed.
func (l *MemLedger) Apply(cat *Catalog, ev Event) (Outcome, error) {
	out, err := Apply(cat, l, ev)
	if err == nil {
		l.Store(out)
	}
	return out, err
}

// Items returns every item, sorted by id.
func (l *MemLedger) Items() []Item {
	out := make([]Item, 0, len(l.items))
	for _, it := range l.items {
		out = append(out, it)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
