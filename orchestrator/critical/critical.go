// Package critical admits the critical events map servers send and owns the item
// ownership they change: it validates an event, checks that the sending map holds the
// authority lease of every character the event touches, and has the store record it
// with the item rules of mapserver/kernel/items deciding, inside the store's transaction, what
// the event may do. It also serves a map's item ownership and critical-item policies,
// and the operators' edits of those policies. The store only stores; every decision
// about an item is made here, with the rules the map server runs too.
package critical

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
)

// Leases is what the service needs from the admission service's authority leases.
type Leases interface {
	// Authorize checks that instanceID holds characterID's lease at epoch (EFORBIDDEN,
	// ECONFLICT otherwise).
	Authorize(ctx context.Context, characterID, instanceID string, epoch int64) error
	// Lease returns a character's current lease.
	Lease(ctx context.Context, characterID string) (orchestrator.Lease, error)
}

// Store is the persistence the service uses.
type Store interface {
	orchestrator.CriticalEventStore
	orchestrator.ItemStore
	orchestrator.PolicyStore
}

// Service admits critical events and serves item ownership and policies. Set the
// fields (NewService does) before use; it is safe for concurrent use.
type Service struct {
	Store  Store
	Leases Leases
	// Catalog is the item catalog the rules read templates from; it must be the one the
	// map servers use.
	Catalog *items.Catalog
}

// NewService returns a service over store and leases with the reference game's
// catalog.
func NewService(store Store, leases Leases) *Service {
	return &Service{Store: store, Leases: leases, Catalog: items.DefaultCatalog()}
}

// Commit admits a critical event from a map and answers once it is durable. Item
// events are accepted only from the map that holds every character they give an item
// to or take one from, at the epochs it quotes, so a map that lost a character cannot
// spend its items; a recovery may take an item from an inactive character only if no
// other map holds it (items.CodeHolderActive). Transfer boundaries are the
// orchestrator's own (written by request-transfer), never a map's. A retry of an event
// already committed is answered with its first ack even when the lease check would
// now refuse it, so an ack lost on the way is never turned into a refusal.
//
// Error codes: EBADREQUEST, ETOOLARGE, EFORBIDDEN, ECONFLICT (lease epoch, or the event
// id used for another event), ENOTFOUND (an item holder that is not a saved character),
// the item rules' item_* codes (409), EUNAVAILABLE (store closing).
func (s *Service) Commit(ctx context.Context, ev record.CriticalEvent) (record.CriticalAck, error) {
	c, err := s.admit(ctx, ev, s.Leases.Authorize)
	if err != nil {
		return record.CriticalAck{}, err
	}
	return s.Store.CommitCritical(ctx, c)
}

// admit is what Commit decides before the store: the event prepared, and for an item
// event the lease check through authorize. A retry of an event committed before the
// map lost the lease is admitted (the store answers it with its first ack, without
// deciding again).
func (s *Service) admit(ctx context.Context, ev record.CriticalEvent, authorize authorizeFunc) (orchestrator.CriticalCommit, error) {
	c, iev, err := Prepare(s.Catalog, ev)
	if err != nil || iev == nil {
		return c, err
	}
	if err := s.authorize(ctx, iev, ev.Epochs, authorize); err != nil {
		if _, found := s.Store.CriticalEvent(ctx, c.Event.EventID); found == nil {
			return c, nil
		}
		return c, err
	}
	return c, nil
}

// authorizeFunc is Leases.Authorize, or a batch's memo of it.
type authorizeFunc func(ctx context.Context, characterID, instanceID string, epoch int64) error

// authorize is the lease check of an item event.
func (s *Service) authorize(ctx context.Context, ev *items.Event, epochs map[string]int64, authorize authorizeFunc) error {
	for _, id := range ev.Characters() {
		if err := authorize(ctx, id, ev.InstanceID, epochs[id]); err != nil {
			return err
		}
	}
	if id := ev.RecoveredFrom(); id != "" {
		l, err := s.Leases.Lease(ctx, id)
		if err != nil {
			return err
		}
		if l.TransferID != "" || (l.InstanceID != "" && l.InstanceID != ev.InstanceID) {
			return apierr.Errorf(items.CodeHolderActive, "character %q is active elsewhere and keeps item %q", id, ev.ItemID)
		}
	}
	return nil
}

// MaxKindLen bounds a critical event's kind.
const MaxKindLen = 64

// Prepare validates a critical event a map sends, compacts its payload (so retries
// compare equal whatever their whitespace) and returns the commit the store records.
// For an item event (a kind beginning with "item_") it also decodes and validates the
// payload, returns it, and sets the commit's Items to the rules' decision. A
// transfer_boundary is refused: only the orchestrator writes one, built by
// orchestrator.BoundaryCommit. Other kinds are recorded only. Error codes: EBADREQUEST,
// ETOOLARGE.
func Prepare(cat *items.Catalog, ev record.CriticalEvent) (orchestrator.CriticalCommit, *items.Event, error) {
	bad := func(format string, args ...any) error {
		return apierr.Errorf(apierr.EBADREQUEST, "critical event: "+format, args...)
	}
	switch {
	case !record.ValidKey(ev.EventID):
		return orchestrator.CriticalCommit{}, nil, bad("eventId must be 1 to %d printable characters", record.MaxKeyLen)
	case !record.ValidKey(ev.InstanceID):
		return orchestrator.CriticalCommit{}, nil, bad("instanceId must be 1 to %d printable characters", record.MaxKeyLen)
	case ev.Kind == "" || len(ev.Kind) > MaxKindLen:
		return orchestrator.CriticalCommit{}, nil, bad("kind must be 1 to %d characters", MaxKindLen)
	case ev.MapTick < 0:
		return orchestrator.CriticalCommit{}, nil, bad("mapTick must not be negative")
	case ev.Kind == record.EventTransferBoundary:
		// The orchestrator writes boundaries itself, with the state a transfer request
		// hands over (orchestrator.BoundaryCommit); a map never sends one.
		return orchestrator.CriticalCommit{}, nil, bad("transfer boundaries are recorded through %s", mapcontract.PathRequestTransfer)
	case len(ev.Payload) > record.MaxCriticalPayloadBytes:
		return orchestrator.CriticalCommit{}, nil, apierr.Errorf(apierr.ETOOLARGE, "critical event payload is %d bytes, limit is %d", len(ev.Payload), record.MaxCriticalPayloadBytes)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, ev.Payload); err != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return orchestrator.CriticalCommit{}, nil, bad("payload must be a JSON object")
	}
	ev.Payload = buf.Bytes()
	c := orchestrator.CriticalCommit{Event: ev}
	if !strings.HasPrefix(ev.Kind, items.CodePrefix) {
		return c, nil, nil
	}
	p, err := items.DecodePayload(ev.Payload)
	if err != nil {
		return c, nil, asAPIError(err)
	}
	iev := &items.Event{ID: ev.EventID, Kind: items.Kind(ev.Kind), InstanceID: ev.InstanceID, MapTick: ev.MapTick, Payload: p}
	if err := iev.Validate(); err != nil {
		return c, nil, asAPIError(err)
	}
	c.Items = func(led items.Ledger) (items.Outcome, error) {
		out, err := items.Apply(cat, led, *iev)
		return out, asAPIError(err)
	}
	return c, iev, nil
}

// asAPIError turns an item rule refusal into mapyard's error type: bad_request for a
// malformed event, the rule's own item_* code (answered 409; item_not_found 404)
// otherwise. Other errors (a failed read) are returned as they are.
func asAPIError(err error) error {
	var r *items.Refusal
	if !errors.As(err, &r) {
		return err
	}
	if r.Code == items.CodeMalformed {
		return apierr.Errorf(apierr.EBADREQUEST, "%s", r.Message)
	}
	return &apierr.Error{Code: r.Code, Message: r.Message}
}

// copiesIn returns the ids of the policy copies anchored in instanceID, and those
// policies.
func copiesIn(pols []items.Policy, instanceID string) (ids []string, anchored []items.Policy) {
	anchored = []items.Policy{}
	for _, p := range pols {
		if !p.AnchoredIn(instanceID) {
			continue
		}
		anchored = append(anchored, p)
		for _, c := range p.Copies() {
			if c.Anchor.InstanceID == instanceID {
				ids = append(ids, c.ItemID)
			}
		}
	}
	return ids, anchored
}

// requireInstance refuses an invalid instance id.
func requireInstance(id string) error {
	if !record.ValidKey(id) {
		return apierr.Errorf(apierr.EBADREQUEST, "instanceId must be 1 to %d printable characters", record.MaxKeyLen)
	}
	return nil
}

// errf wraps a store error with context, keeping its code.
func errf(err error, format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// CommitBatch admits the events of a batch as Commit does each and has the store commit
// those admitted in one request, in the batch's order and in one transaction (each
// event on its own, so a refused one is rolled back alone); it answers once every one
// is durable or refused, with the results in the batch's order. One request instead of
// one per event is what lets a tick's events share one fsync: sent one by one, the
// first reached an idle writer alone and the rest waited for its commit. A lease is
// read once per character and epoch for the whole batch. An event of another instance
// than the batch's is refused alone (EFORBIDDEN). Error codes of the batch itself:
// EBADREQUEST (no events, more than mapcontract.MaxCriticalBatch, or an event id twice).
func (s *Service) CommitBatch(ctx context.Context, b mapcontract.CriticalBatch) (*mapcontract.CriticalBatchAnswer, error) {
	if len(b.Events) == 0 || len(b.Events) > mapcontract.MaxCriticalBatch {
		return nil, apierr.Errorf(apierr.EBADREQUEST, "a batch carries 1 to %d events", mapcontract.MaxCriticalBatch)
	}
	seen := make(map[string]bool, len(b.Events))
	for i, ev := range b.Events {
		if seen[ev.EventID] {
			return nil, apierr.Errorf(apierr.EBADREQUEST, "events[%d]: event id %q listed twice", i, ev.EventID)
		}
		seen[ev.EventID] = true
	}
	res := make([]mapcontract.CriticalResult, len(b.Events))
	refuse := func(i int, err error) {
		res[i].Error = &apierr.Error{Code: apierr.Code(err), Message: apierr.Message(err)}
	}
	authorize := memoAuthorize(s.Leases.Authorize)
	commits := make([]orchestrator.CriticalCommit, 0, len(b.Events))
	idx := make([]int, 0, len(b.Events)) // the batch index of each of commits
	for i, ev := range b.Events {
		if ev.InstanceID != b.InstanceID {
			refuse(i, apierr.Errorf(apierr.EFORBIDDEN, "event of instance %q in a batch of %q", ev.InstanceID, b.InstanceID))
			continue
		}
		c, err := s.admit(ctx, ev, authorize)
		if err != nil {
			refuse(i, err)
			continue
		}
		commits, idx = append(commits, c), append(idx, i)
	}
	if len(commits) > 0 {
		for j, r := range s.Store.CommitCriticalBatch(ctx, commits) {
			if r.Err != nil {
				refuse(idx[j], r.Err)
				continue
			}
			res[idx[j]].Ack = &r.Ack
		}
	}
	return &mapcontract.CriticalBatchAnswer{Results: res}, nil
}

// memoAuthorize returns authorize remembering its answers, for one batch: a tick's
// events mostly come from the same few characters, whose leases are then read once
// rather than once per event. Leases are read before the store's transaction in any
// case; a batch reads each at one moment.
func memoAuthorize(authorize authorizeFunc) authorizeFunc {
	type key struct {
		characterID, instanceID string
		epoch                   int64
	}
	seen := map[key]error{}
	return func(ctx context.Context, characterID, instanceID string, epoch int64) error {
		k := key{characterID, instanceID, epoch}
		err, ok := seen[k]
		if !ok {
			err = authorize(ctx, characterID, instanceID, epoch)
			seen[k] = err
		}
		return err
	}
}
