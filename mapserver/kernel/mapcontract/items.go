package mapcontract

import (
	"context"

	"github.com/mapyard/mapyard/mapserver/kernel/items"
)

// Item routes of the control listener: maps load and seed their item ownership and
// load their critical-item policies.
const (
	PathInstanceItems  = "/orch/instance-items"
	PathCharacterItems = "/orch/character-items"
	PathItemPolicies   = "/orch/item-policies"
)

// MaxSeedItems bounds the world items one instance-items call may seed.
const MaxSeedItems = 20000

// MaxInstanceItemsBody bounds an instance-items request (a full seed of MaxSeedItems).
const MaxInstanceItemsBody = 8 << 20

// InstanceItemsRequest is a map's call at start (POST /orch/instance-items): it seeds
// the ordinary world items its generator placed (ids derived from the seed, so the same
// ids on every start) and loads the instance's ownership state. A seeded id the
// orchestrator knows already keeps its stored state, so a restarted map never
// duplicates an item a player picked up or used.
type InstanceItemsRequest struct {
	InstanceID string       `json:"instanceId"`
	Seed       []items.Item `json:"seed,omitempty"`
}

// InstanceItemsAnswer is the instance's ownership state after the seed: the items lying
// (or last lying) in it, the items held by characters it holds the lease of, and the
// policy copies anchored in it (live and destroyed), by id; and the critical-item
// policies anchored in it. A generated id not among the live world items of the
// instance is held elsewhere or used up: the map does not place it.
type InstanceItemsAnswer struct {
	Items    []items.Item   `json:"items"`
	Policies []items.Policy `json:"policies"`
}

// CharacterItemsRequest asks for the items a character holds
// (POST /orch/character-items), by the map that holds its lease at Epoch: what the map
// loads when the character arrives.
type CharacterItemsRequest struct {
	InstanceID  string `json:"instanceId"`
	CharacterID string `json:"characterId"`
	Epoch       int64  `json:"epoch"`
}

// CharacterItemsAnswer lists the live items a character holds, by id.
type CharacterItemsAnswer struct {
	Items []items.Item `json:"items"`
}

// ItemPoliciesRequest asks for the critical-item policies anchored in an instance
// (POST /orch/item-policies): what a map reloads to pick up an operator's edit.
type ItemPoliciesRequest struct {
	InstanceID string `json:"instanceId"`
}

// ItemPoliciesAnswer lists policies by item id.
type ItemPoliciesAnswer struct {
	Policies []items.Policy `json:"policies"`
}

// InstanceItems seeds and loads an instance's item ownership. Retried: seeding is
// idempotent by item id.
func (c *Client) InstanceItems(ctx context.Context, r InstanceItemsRequest) (InstanceItemsAnswer, error) {
	return retried[InstanceItemsAnswer](ctx, c, PathInstanceItems, r)
}

// CharacterItems loads the items a character holds. Retried: it only reads.
func (c *Client) CharacterItems(ctx context.Context, r CharacterItemsRequest) (CharacterItemsAnswer, error) {
	return retried[CharacterItemsAnswer](ctx, c, PathCharacterItems, r)
}

// ItemPolicies loads the critical-item policies anchored in an instance. Retried: it
// only reads.
func (c *Client) ItemPolicies(ctx context.Context, r ItemPoliciesRequest) (ItemPoliciesAnswer, error) {
	return retried[ItemPoliciesAnswer](ctx, c, PathItemPolicies, r)
}
