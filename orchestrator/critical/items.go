package critical

import (
	"context"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
)

// InstanceItems seeds the ordinary world items a map generated and answers with the
// instance's ownership state and policies (POST /orch/instance-items). The seed is
// decided with items.Spawn inside one store transaction, all or nothing: an id the
// store knows keeps its stored state (a restarted map duplicates nothing), a critical
// or unknown template or a position outside the instance is refused.
//
// Error codes: EBADREQUEST, ETOOLARGE (more than mapcontract.MaxSeedItems), the item rules'
// item_* codes naming the first refused seed item.
func (s *Service) InstanceItems(ctx context.Context, r mapcontract.InstanceItemsRequest) (*mapcontract.InstanceItemsAnswer, error) {
	if err := requireInstance(r.InstanceID); err != nil {
		return nil, err
	} else if len(r.Seed) > mapcontract.MaxSeedItems {
		return nil, apierr.Errorf(apierr.ETOOLARGE, "seed has %d items, limit is %d", len(r.Seed), mapcontract.MaxSeedItems)
	}
	if len(r.Seed) > 0 {
		if err := s.seed(ctx, r.InstanceID, r.Seed); err != nil {
			return nil, err
		}
	}
	pols, err := s.Store.ItemPolicies(ctx)
	if err != nil {
		return nil, errf(err, "instance items of %q", r.InstanceID)
	}
	ids, anchored := copiesIn(pols, r.InstanceID)
	list, err := s.Store.InstanceItems(ctx, r.InstanceID, ids)
	if err != nil {
		return nil, errf(err, "instance items of %q", r.InstanceID)
	}
	return &mapcontract.InstanceItemsAnswer{Items: list, Policies: anchored}, nil
}

// seed stores the seed items the store does not know yet.
func (s *Service) seed(ctx context.Context, instanceID string, seed []items.Item) error {
	seen := make(map[string]bool, len(seed))
	for i, it := range seed {
		if seen[it.ID] {
			return apierr.Errorf(apierr.EBADREQUEST, "seed[%d]: item %q listed twice", i, it.ID)
		}
		seen[it.ID] = true
	}
	return s.Store.SeedItems(ctx, func(led items.Ledger) ([]items.Item, error) {
		var fresh []items.Item
		uniques := map[string]bool{}
		for i, it := range seed {
			known, err := items.Spawn(s.Catalog, led, instanceID, it)
			if err != nil {
				return nil, prefixed(asAPIError(err), i)
			} else if known {
				continue
			}
			if t, _ := s.Catalog.Template(it.TemplateID); t.Unique {
				if uniques[t.ID] {
					return nil, apierr.Errorf(items.CodeUniqueExists, "seed[%d]: a second %s", i, t.Name)
				}
				uniques[t.ID] = true
			}
			fresh = append(fresh, it)
		}
		return fresh, nil
	})
}

// prefixed names the seed item an error is about.
func prefixed(err error, i int) error {
	if e, ok := err.(*apierr.Error); ok {
		return apierr.Errorf(e.Code, "seed[%d]: %s", i, e.Message)
	}
	return err
}

// CharacterItems answers the live items a character holds to the map that holds its
// lease (POST /orch/character-items). Error codes: EBADREQUEST, EFORBIDDEN, ECONFLICT.
func (s *Service) CharacterItems(ctx context.Context, r mapcontract.CharacterItemsRequest) (*mapcontract.CharacterItemsAnswer, error) {
	if err := requireInstance(r.InstanceID); err != nil {
		return nil, err
	} else if !record.ValidKey(r.CharacterID) {
		return nil, apierr.Errorf(apierr.EBADREQUEST, "characterId required")
	}
	if err := s.Leases.Authorize(ctx, r.CharacterID, r.InstanceID, r.Epoch); err != nil {
		return nil, err
	}
	list, err := s.Store.CharacterItems(ctx, r.CharacterID)
	if err != nil {
		return nil, errf(err, "items of %q", r.CharacterID)
	}
	return &mapcontract.CharacterItemsAnswer{Items: list}, nil
}

// InstancePolicies answers the critical-item policies anchored in an instance
// (POST /orch/item-policies). Error codes: EBADREQUEST.
func (s *Service) InstancePolicies(ctx context.Context, r mapcontract.ItemPoliciesRequest) (*mapcontract.ItemPoliciesAnswer, error) {
	if err := requireInstance(r.InstanceID); err != nil {
		return nil, err
	}
	pols, err := s.Store.ItemPolicies(ctx)
	if err != nil {
		return nil, errf(err, "policies of %q", r.InstanceID)
	}
	_, anchored := copiesIn(pols, r.InstanceID)
	return &mapcontract.ItemPoliciesAnswer{Policies: anchored}, nil
}

// Policies lists every critical-item policy, by item id (GET /admin/item-policies).
func (s *Service) Policies(ctx context.Context) ([]items.Policy, error) {
	return s.Store.ItemPolicies(ctx)
}

// Policy returns one policy (GET /admin/item-policies/{itemId}). Error codes: ENOTFOUND.
func (s *Service) Policy(ctx context.Context, itemID string) (items.Policy, error) {
	return s.Store.ItemPolicy(ctx, itemID)
}

// PutPolicy validates p against the catalog and creates or replaces the policy of
// itemID (PUT /admin/item-policies/{itemId}); p.ItemID may be left empty and otherwise
// must equal itemID. Maps pick the change up when they next load their policies.
// Error codes: EBADREQUEST with what is wrong.
func (s *Service) PutPolicy(ctx context.Context, itemID string, p items.Policy) (items.Policy, bool, error) {
	if p.ItemID == "" {
		p.ItemID = itemID
	}
	if p.ItemID != itemID {
		return p, false, apierr.Errorf(apierr.EBADREQUEST, "itemId %q in the body differs from %q in the path", p.ItemID, itemID)
	}
	if err := p.Validate(s.Catalog); err != nil {
		return p, false, apierr.Errorf(apierr.EBADREQUEST, "policy of %q: %v", itemID, err)
	}
	created, err := s.Store.PutItemPolicy(ctx, p)
	return p, created, err
}

// DeletePolicy removes a policy (DELETE /admin/item-policies/{itemId}); the items it
// kept stay where they are, no longer recovered. Error codes: ENOTFOUND.
func (s *Service) DeletePolicy(ctx context.Context, itemID string) error {
	return s.Store.DeleteItemPolicy(ctx, itemID)
}

// DefaultRecoveryLimit and MaxRecoveryLimit bound one read of the recovery audit.
const (
	DefaultRecoveryLimit = 100
	MaxRecoveryLimit     = 10000
)

// Recoveries returns the recovery audit of itemID (every item when empty), oldest
// first, at most limit rows (GET /admin/item-recoveries). Error codes: EBADREQUEST.
func (s *Service) Recoveries(ctx context.Context, itemID string, limit int) ([]orchestrator.ItemRecovery, error) {
	if limit <= 0 {
		limit = DefaultRecoveryLimit
	} else if limit > MaxRecoveryLimit {
		return nil, apierr.Errorf(apierr.EBADREQUEST, "limit must be at most %d", MaxRecoveryLimit)
	}
	return s.Store.ItemRecoveries(ctx, itemID, limit)
}

// Item returns what the orchestrator knows of one item, live or used up: its holder,
// its place and the last critical event that changed it (GET /admin/items/{id}). Error
// codes: EBADREQUEST (not an item id), item_not_found (apierr.EITEMNOTFOUND).
func (s *Service) Item(ctx context.Context, itemID string) (*orchestrator.ItemRecord, error) {
	if !items.ValidID(itemID) {
		return nil, apierr.Errorf(apierr.EBADREQUEST, "an item id is 1 to %d printable characters without spaces", items.MaxIDLen)
	}
	rec, err := s.Store.ItemRecord(ctx, itemID)
	if apierr.Code(err) == apierr.ENOTFOUND {
		return nil, apierr.Errorf(apierr.EITEMNOTFOUND, "no item %q", itemID)
	} else if err != nil {
		return nil, errf(err, "item %q", itemID)
	}
	return rec, nil
}

// HeldItems returns the live items a saved character holds, by id, as Item describes
// each (GET /admin/items?holder=). Error codes: EBADREQUEST (not a character id),
// ENOTFOUND (no saved character has that id; guests hold no items).
func (s *Service) HeldItems(ctx context.Context, characterID string) ([]orchestrator.ItemRecord, error) {
	if !items.ValidID(characterID) {
		return nil, apierr.Errorf(apierr.EBADREQUEST, "holder must be a character id: 1 to %d printable characters without spaces", items.MaxIDLen)
	}
	list, err := s.Store.HeldItemRecords(ctx, characterID)
	if err != nil {
		return nil, errf(err, "items held by %q", characterID)
	}
	return list, nil
}
