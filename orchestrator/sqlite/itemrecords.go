package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/orchestrator"
)

// itemRecordQuery reads items with their last critical event (inventory_items.
// last_event_seq), in the order scanItemRecord reads them; callers add the WHERE.
const itemRecordQuery = `SELECT i.item_id, i.template_id, i.quantity, i.owner_character_id, i.location_instance_id,
	i.location_x, i.location_y, i.state, i.since_tick, i.updated_at_ms,
	e.event_id, e.kind, e.instance_id, e.map_tick, e.committed_at_ms
	FROM inventory_items i LEFT JOIN critical_events e ON e.seq = i.last_event_seq `

func scanItemRecord(r rowScanner) (orchestrator.ItemRecord, error) {
	var rec orchestrator.ItemRecord
	it := &rec.Item
	var ch, inst, evID, evKind, evInst sql.NullString
	var evTick, evMs sql.NullInt64
	var state string
	var updated int64
	if err := r.Scan(&it.ID, &it.TemplateID, &it.Quantity, &ch, &inst, &it.Place.X, &it.Place.Y, &state, &it.SinceTick, &updated,
		&evID, &evKind, &evInst, &evTick, &evMs); err != nil {
		return rec, err
	}
	placeItem(it, ch, inst, state)
	if it.Live() && it.Place.Held() {
		rec.Holder = it.Place.CharacterID
	}
	rec.UpdatedAt = fromMs(updated)
	if evID.Valid {
		rec.LastEvent = &orchestrator.ItemEvent{EventID: evID.String, Kind: evKind.String, InstanceID: evInst.String,
			MapTick: evTick.Int64, CommittedAt: fromMs(evMs.Int64)}
	}
	return rec, nil
}

// ItemRecord returns one item with its holder and last critical event, or ENOTFOUND.
func (db *DB) ItemRecord(ctx context.Context, itemID string) (*orchestrator.ItemRecord, error) {
	rec, err := scanItemRecord(db.read.QueryRowContext(ctx, itemRecordQuery+`WHERE i.item_id = ?`, itemID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, apierr.Errorf(apierr.ENOTFOUND, "no item %q", itemID)
	} else if err != nil {
		return nil, fmt.Errorf("read item %q: %w", itemID, err)
	}
	return &rec, nil
}

// HeldItemRecords returns the live items a saved character holds, by id, or ENOTFOUND
// for a character that is not saved.
func (db *DB) HeldItemRecords(ctx context.Context, characterID string) ([]orchestrator.ItemRecord, error) {
	var one int
	err := db.read.QueryRowContext(ctx, sqlCharExists, characterID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, apierr.Errorf(apierr.ENOTFOUND, "character %q not found", characterID)
	} else if err != nil {
		return nil, fmt.Errorf("read character %q: %w", characterID, err)
	}
	rows, err := db.read.QueryContext(ctx, itemRecordQuery+`WHERE i.owner_character_id = ? AND i.state = 'active' ORDER BY i.item_id`, characterID)
	if err != nil {
		return nil, fmt.Errorf("items held by %q: %w", characterID, err)
	}
	defer rows.Close()
	list := []orchestrator.ItemRecord{}
	for rows.Next() {
		rec, err := scanItemRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("items held by %q: %w", characterID, err)
		}
		list = append(list, rec)
	}
	return list, rows.Err()
}
