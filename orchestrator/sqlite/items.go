package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
)

// itemCols are the columns of an item row, in the order scanItem reads them.
const itemCols = `item_id, template_id, quantity, owner_character_id, location_instance_id, location_x, location_y, state, since_tick`

// Item statements prepared on the write connection (see writeStmts).
const (
	sqlReadItem       = `SELECT ` + itemCols + ` FROM inventory_items WHERE item_id = ?`
	sqlLiveOfTemplate = `SELECT COUNT(*) FROM inventory_items WHERE template_id = ? AND state = 'active'`
	sqlReadPolicy     = `SELECT ` + policyCols + ` FROM critical_item_policy WHERE item_id = ?`
	sqlUpdateItem     = `UPDATE inventory_items SET template_id = ?2, quantity = ?3, owner_character_id = ?4,
		location_instance_id = ?5, location_x = ?6, location_y = ?7, state = ?8, since_tick = ?9, updated_at_ms = ?10,
		last_event_seq = coalesce(?11, last_event_seq)
		WHERE item_id = ?1`
	sqlInsertItem = `INSERT INTO inventory_items (item_id, template_id, quantity, owner_character_id,
		location_instance_id, location_x, location_y, state, since_tick, updated_at_ms, last_event_seq)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)`
	sqlInsertRecovery = `INSERT INTO item_recoveries (event_id, instance_id, tick, item_id, trigger,
		old_character_id, old_instance_id, old_x, old_y, new_instance_id, new_x, new_y, at_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// rowScanner is what *sql.Row and *sql.Rows have in common.
type rowScanner interface{ Scan(dest ...any) error }

func scanItem(r rowScanner) (items.Item, error) {
	var it items.Item
	var ch, inst sql.NullString
	var state string
	if err := r.Scan(&it.ID, &it.TemplateID, &it.Quantity, &ch, &inst, &it.Place.X, &it.Place.Y, &state, &it.SinceTick); err != nil {
		return it, err
	}
	placeItem(&it, ch, inst, state)
	return it, nil
}

// placeItem completes an item scanned from a row with its state and place: a holder or
// a world position, never both.
func placeItem(it *items.Item, ch, inst sql.NullString, state string) {
	it.State = items.State(state)
	it.Place.CharacterID, it.Place.InstanceID = ch.String, inst.String
	if !inst.Valid {
		it.Place.X, it.Place.Y = 0, 0
	}
}

// txLedger is the ownership state the item rules read inside the writer's transaction,
// so that a decision and its write cannot be separated by another event.
type txLedger struct {
	ctx context.Context
	db  *DB
	tx  *sql.Tx
}

var _ items.Ledger = (*txLedger)(nil)

// Item reads one item row, live or destroyed.
func (l *txLedger) Item(id string) (items.Item, bool, error) {
	it, err := scanItem(l.db.stmt(l.ctx, l.tx, sqlReadItem).QueryRowContext(l.ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return items.Item{}, false, nil
	} else if err != nil {
		return items.Item{}, false, fmt.Errorf("read item %q: %w", id, err)
	}
	return it, true, nil
}

// LiveOfTemplate counts the live items of a template (partial index on live rows).
func (l *txLedger) LiveOfTemplate(templateID string) (n int, err error) {
	if err = l.db.stmt(l.ctx, l.tx, sqlLiveOfTemplate).QueryRowContext(l.ctx, templateID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count items of %q: %w", templateID, err)
	}
	return n, nil
}

// Policy reads one critical-item policy.
func (l *txLedger) Policy(itemID string) (items.Policy, bool, error) {
	p, err := scanPolicy(l.db.stmt(l.ctx, l.tx, sqlReadPolicy).QueryRowContext(l.ctx, itemID))
	if errors.Is(err, sql.ErrNoRows) {
		return items.Policy{}, false, nil
	} else if err != nil {
		return items.Policy{}, false, fmt.Errorf("read policy %q: %w", itemID, err)
	}
	return p, true, nil
}

// writeItems stores the new state of items, refusing with ENOTFOUND a holder that is
// not a saved character (disposable session characters never own persistent items).
// eventSeq is the critical event that changed them, kept as each item's last event; 0
// for a seed, which keeps what an item had.
func (db *DB) writeItems(ctx context.Context, tx *sql.Tx, list []items.Item, eventSeq, nowMs int64) error {
	seq := sql.NullInt64{Int64: eventSeq, Valid: eventSeq != 0}
	for _, it := range list {
		var ch, inst sql.NullString
		if it.Place.CharacterID != "" {
			if err := db.requireCharacter(ctx, tx, it.Place.CharacterID); err != nil {
				return err
			}
			ch = sql.NullString{String: it.Place.CharacterID, Valid: true}
		}
		if it.Place.InstanceID != "" {
			inst = sql.NullString{String: it.Place.InstanceID, Valid: true}
		}
		// Most writes move an existing item, so UPDATE first; INSERT only a new one.
		args := []any{it.ID, it.TemplateID, it.Quantity, ch, inst, it.Place.X, it.Place.Y, string(it.State), it.SinceTick, nowMs, seq}
		res, err := db.stmt(ctx, tx, sqlUpdateItem).ExecContext(ctx, args...)
		if err != nil {
			return fmt.Errorf("write item %q: %w", it.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("write item %q: %w", it.ID, err)
		} else if n == 0 {
			if _, err := db.stmt(ctx, tx, sqlInsertItem).ExecContext(ctx, args...); err != nil {
				return fmt.Errorf("write item %q: %w", it.ID, err)
			}
		}
	}
	return nil
}

// insertRecovery appends the audit row of a recovery event.
func (db *DB) insertRecovery(ctx context.Context, tx *sql.Tx, ev record.CriticalEvent, out items.Outcome, nowMs int64) error {
	r := out.Recovery
	null := func(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
	_, err := db.stmt(ctx, tx, sqlInsertRecovery).ExecContext(ctx, ev.EventID, ev.InstanceID, r.Tick, r.ItemID, r.Trigger,
		null(r.From.CharacterID), null(r.From.InstanceID), r.From.X, r.From.Y, r.To.InstanceID, r.To.X, r.To.Y, nowMs)
	if err != nil {
		return fmt.Errorf("audit recovery of %q: %w", r.ItemID, err)
	}
	return nil
}

// SeedItems runs decide in one write transaction and stores what it returns.
func (db *DB) SeedItems(ctx context.Context, decide func(items.Ledger) ([]items.Item, error)) error {
	nowMs := db.Now().UnixMilli()
	return db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		list, err := decide(&txLedger{ctx: ctx, db: db, tx: tx})
		if err != nil {
			return err
		}
		return db.writeItems(ctx, tx, list, 0, nowMs)
	})
}

// InstanceItems returns an instance's ownership state; see orchestrator.ItemStore.
func (db *DB) InstanceItems(ctx context.Context, instanceID string, also []string) ([]items.Item, error) {
	ids, err := json.Marshal(append([]string{}, also...))
	if err != nil {
		return nil, fmt.Errorf("instance items: %w", err)
	}
	return db.queryItems(ctx, `SELECT `+itemCols+` FROM inventory_items WHERE location_instance_id = ?1
		UNION SELECT `+itemCols+` FROM inventory_items WHERE state = 'active' AND owner_character_id IN
			(SELECT character_id FROM authority_leases WHERE instance_id = ?1)
		UNION SELECT `+itemCols+` FROM inventory_items WHERE item_id IN (SELECT value FROM json_each(?2))
		ORDER BY item_id`, instanceID, string(ids))
}

// CharacterItems returns the live items characterID holds, by id.
func (db *DB) CharacterItems(ctx context.Context, characterID string) ([]items.Item, error) {
	return db.queryItems(ctx, `SELECT `+itemCols+` FROM inventory_items
		WHERE owner_character_id = ? AND state = 'active' ORDER BY item_id`, characterID)
}

func (db *DB) queryItems(ctx context.Context, q string, args ...any) ([]items.Item, error) {
	rows, err := db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list items: %w", err)
	}
	defer rows.Close()
	list := []items.Item{}
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return nil, fmt.Errorf("scan item: %w", err)
		}
		list = append(list, it)
	}
	return list, rows.Err()
}

// ItemRecoveries returns the recovery audit, oldest first, of itemID or of every item.
func (db *DB) ItemRecoveries(ctx context.Context, itemID string, limit int) ([]orchestrator.ItemRecovery, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT event_id, instance_id, tick, item_id, trigger, old_character_id,
		old_instance_id, old_x, old_y, new_instance_id, new_x, new_y, at_ms
		FROM item_recoveries WHERE ?1 = '' OR item_id = ?1 ORDER BY recovery_id LIMIT ?2`, itemID, limit)
	if err != nil {
		return nil, fmt.Errorf("list recoveries: %w", err)
	}
	defer rows.Close()
	list := []orchestrator.ItemRecovery{}
	for rows.Next() {
		var r orchestrator.ItemRecovery
		var oldCh, oldInst sql.NullString
		var ms int64
		if err := rows.Scan(&r.EventID, &r.InstanceID, &r.Tick, &r.ItemID, &r.Trigger, &oldCh, &oldInst,
			&r.From.X, &r.From.Y, &r.To.InstanceID, &r.To.X, &r.To.Y, &ms); err != nil {
			return nil, fmt.Errorf("scan recovery: %w", err)
		}
		r.From.CharacterID, r.From.InstanceID, r.At = oldCh.String, oldInst.String, fromMs(ms)
		list = append(list, r)
	}
	return list, rows.Err()
}

// policyCols are the columns of a policy row, in the order scanPolicy reads them.
const policyCols = `item_id, template_id, policy_type, anchor_locations, cooldown_ticks, ownership_timeout_ticks, quest_gate`

func scanPolicy(r rowScanner) (items.Policy, error) {
	var p items.Policy
	var typ, anchors string
	var gate sql.NullString
	if err := r.Scan(&p.ItemID, &p.TemplateID, &typ, &anchors, &p.CooldownTicks, &p.OwnershipTimeoutTicks, &gate); err != nil {
		return p, err
	}
	p.Type, p.QuestGate = items.PolicyType(typ), gate.String
	if err := json.Unmarshal([]byte(anchors), &p.Anchors); err != nil {
		return p, fmt.Errorf("anchor_locations of %q: %w", p.ItemID, err)
	}
	return p, nil
}

// ItemPolicies returns every critical-item policy, by item id.
func (db *DB) ItemPolicies(ctx context.Context) ([]items.Policy, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT `+policyCols+` FROM critical_item_policy ORDER BY item_id`)
	if err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	defer rows.Close()
	list := []items.Policy{}
	for rows.Next() {
		p, err := scanPolicy(rows)
		if err != nil {
			return nil, fmt.Errorf("scan policy: %w", err)
		}
		list = append(list, p)
	}
	return list, rows.Err()
}

// ItemPolicy returns one policy, or ENOTFOUND.
func (db *DB) ItemPolicy(ctx context.Context, itemID string) (items.Policy, error) {
	p, err := scanPolicy(db.read.QueryRowContext(ctx, `SELECT `+policyCols+` FROM critical_item_policy WHERE item_id = ?`, itemID))
	if errors.Is(err, sql.ErrNoRows) {
		return p, apierr.Errorf(apierr.ENOTFOUND, "no critical-item policy for %q", itemID)
	} else if err != nil {
		return p, fmt.Errorf("read policy %q: %w", itemID, err)
	}
	return p, nil
}

// PutItemPolicy creates or replaces a policy and reports whether it was created.
func (db *DB) PutItemPolicy(ctx context.Context, p items.Policy) (created bool, err error) {
	anchors, err := json.Marshal(p.Anchors)
	if err != nil {
		return false, fmt.Errorf("encode anchors of %q: %w", p.ItemID, err)
	}
	nowMs := db.Now().UnixMilli()
	err = db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM critical_item_policy WHERE item_id = ?`, p.ItemID).Scan(&n); err != nil {
			return err
		}
		created = n == 0
		_, err := tx.ExecContext(ctx, `INSERT INTO critical_item_policy (item_id, template_id, policy_type, anchor_locations,
			cooldown_ticks, ownership_timeout_ticks, quest_gate, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (item_id) DO UPDATE SET template_id = excluded.template_id, policy_type = excluded.policy_type,
				anchor_locations = excluded.anchor_locations, cooldown_ticks = excluded.cooldown_ticks,
				ownership_timeout_ticks = excluded.ownership_timeout_ticks, quest_gate = excluded.quest_gate,
				updated_at_ms = excluded.updated_at_ms`,
			p.ItemID, p.TemplateID, string(p.Type), string(anchors), p.CooldownTicks, p.OwnershipTimeoutTicks,
			sql.NullString{String: p.QuestGate, Valid: p.QuestGate != ""}, nowMs)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("put policy %q: %w", p.ItemID, err)
	}
	return created, nil
}

// DeleteItemPolicy removes a policy, or returns ENOTFOUND.
func (db *DB) DeleteItemPolicy(ctx context.Context, itemID string) error {
	return db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM critical_item_policy WHERE item_id = ?`, itemID)
		if err != nil {
			return fmt.Errorf("delete policy %q: %w", itemID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("delete policy %q: %w", itemID, err)
		} else if n == 0 {
			return apierr.Errorf(apierr.ENOTFOUND, "no critical-item policy for %q", itemID)
		}
		return nil
	})
}
