package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/apierr"
	"github.com/mapyard/mapyard/orchestrator/control"
)

// criticalReq is a validated critical event on its way to the writer, with its payload
// compacted (so retries compare equal whatever their whitespace) and decoded.
type criticalReq struct {
	ev      control.CriticalEvent
	payload any // *itemGrant, *itemMove, *itemSpend, *trade, *control.CharacterState or nil
}

// itemGrant is the payload of an item_grant event.
type itemGrant struct {
	ItemID   string            `json:"itemId"`
	ItemKind string            `json:"itemKind"`
	Quantity int64             `json:"quantity"`
	To       control.ItemOwner `json:"to"`
}

// itemMove is the payload of item_transfer and item_drop events and one move of a trade.
type itemMove struct {
	ItemID string            `json:"itemId"`
	From   control.ItemOwner `json:"from"`
	To     control.ItemOwner `json:"to"`
}

// itemSpend is the payload of an item_spend event.
type itemSpend struct {
	ItemID   string            `json:"itemId"`
	From     control.ItemOwner `json:"from"`
	Quantity int64             `json:"quantity"`
}

// trade is the payload of a trade event.
type trade struct {
	Moves []itemMove `json:"moves"`
}

// CommitCritical makes ev and its effects durable and then acknowledges it. Concurrent
// callers are group-committed by the writer goroutine. See
// orchestrator.CriticalEventStore for the error codes.
func (db *DB) CommitCritical(ctx context.Context, ev control.CriticalEvent) (control.CriticalAck, error) {
	req, err := parseCritical(ev)
	if err != nil {
		return control.CriticalAck{}, err
	}
	res := db.submit(ctx, &writeReq{ev: req})
	if res.err != nil {
		return control.CriticalAck{}, fmt.Errorf("commit critical event %q: %w", ev.EventID, res.err)
	}
	return res.ack, nil
}

// parseCritical validates ev and decodes the payload of the kinds the store applies.
func parseCritical(ev control.CriticalEvent) (*criticalReq, error) {
	bad := func(format string, args ...any) error {
		return apierr.Errorf(apierr.EBADREQUEST, "critical event: "+format, args...)
	}
	switch {
	case ev.EventID == "" || len(ev.EventID) > control.MaxKeyLen:
		return nil, bad("eventId must be 1 to %d characters", control.MaxKeyLen)
	case ev.InstanceID == "" || len(ev.InstanceID) > control.MaxKeyLen:
		return nil, bad("instanceId must be 1 to %d characters", control.MaxKeyLen)
	case ev.Kind == "" || len(ev.Kind) > 64:
		return nil, bad("kind must be 1 to 64 characters")
	case ev.MapTick < 0:
		return nil, bad("mapTick must not be negative")
	case len(ev.Payload) > control.MaxCriticalPayloadBytes:
		return nil, apierr.Errorf(apierr.ETOOLARGE, "critical event payload is %d bytes, limit is %d", len(ev.Payload), control.MaxCriticalPayloadBytes)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, ev.Payload); err != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return nil, bad("payload must be a JSON object")
	}
	ev.Payload = buf.Bytes()

	req := &criticalReq{ev: ev}
	switch ev.Kind {
	case control.EventItemGrant:
		p := &itemGrant{}
		if err := decodeStrict(ev.Payload, p); err != nil {
			return nil, bad("%s payload: %v", ev.Kind, err)
		} else if !control.ValidKey(p.ItemID) || p.ItemKind == "" || p.Quantity <= 0 || !p.To.Valid() {
			return nil, bad("%s payload needs itemId, itemKind, a positive quantity and one owner in to", ev.Kind)
		}
		req.payload = p
	case control.EventItemTransfer, control.EventItemDrop:
		p := &itemMove{}
		if err := decodeStrict(ev.Payload, p); err != nil {
			return nil, bad("%s payload: %v", ev.Kind, err)
		} else if err := p.validate(); err != nil {
			return nil, bad("%s payload: %v", ev.Kind, err)
		} else if ev.Kind == control.EventItemDrop && (p.From.CharacterID == "" || p.To.ContainerID == "") {
			return nil, bad("%s moves an item from a character to a container", ev.Kind)
		}
		req.payload = p
	case control.EventItemSpend:
		p := &itemSpend{}
		if err := decodeStrict(ev.Payload, p); err != nil {
			return nil, bad("%s payload: %v", ev.Kind, err)
		} else if !control.ValidKey(p.ItemID) || p.Quantity <= 0 || !p.From.Valid() {
			return nil, bad("%s payload needs itemId, one owner in from and a positive quantity", ev.Kind)
		}
		req.payload = p
	case control.EventTrade:
		p := &trade{}
		if err := decodeStrict(ev.Payload, p); err != nil {
			return nil, bad("%s payload: %v", ev.Kind, err)
		} else if len(p.Moves) == 0 || len(p.Moves) > 256 {
			return nil, bad("%s payload needs 1 to 256 moves", ev.Kind)
		}
		for i := range p.Moves {
			if err := p.Moves[i].validate(); err != nil {
				return nil, bad("%s move %d: %v", ev.Kind, i, err)
			}
		}
		req.payload = p
	case control.EventTransferBoundary:
		p := &control.CharacterState{}
		if err := json.Unmarshal(ev.Payload, p); err != nil {
			return nil, bad("%s payload: %v", ev.Kind, err)
		} else if !control.ValidKey(p.CharacterID) || p.MapID == "" || p.InstanceID == "" || p.Revision <= 0 {
			return nil, bad("%s payload needs characterId, mapId, instanceId and a positive revision", ev.Kind)
		} else if len(p.Attributes) > 0 && !json.Valid(p.Attributes) {
			return nil, bad("%s attributes must be JSON", ev.Kind)
		}
		req.payload = p
	}
	return req, nil
}

func (m *itemMove) validate() error {
	if !control.ValidKey(m.ItemID) || !m.From.Valid() || !m.To.Valid() {
		return errors.New("needs itemId and one owner in each of from and to")
	} else if m.From == m.To {
		return errors.New("from and to are the same owner")
	}
	return nil
}

// decodeStrict decodes b into v, refusing unknown fields so that a misspelt field in an
// economy event is an error rather than a silent zero.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// applyCritical records one event and applies its effects inside the writer's current
// transaction. A retried event id returns the first commit's ack.
func (db *DB) applyCritical(ctx context.Context, tx *sql.Tx, req *criticalReq, nowMs int64) (control.CriticalAck, error) {
	ev := req.ev
	ack := control.CriticalAck{EventID: ev.EventID, CommittedAtMs: nowMs}
	// Exec rather than RETURNING: cheaper per event, and the rowid SQLite reports is the
	// event's own even though the audit trigger inserts a row too.
	res, err := db.stmt(ctx, tx, sqlInsertEvent).ExecContext(ctx,
		ev.EventID, ev.InstanceID, ev.Kind, ev.MapTick, []byte(ev.Payload), nowMs)
	if err != nil {
		return ack, fmt.Errorf("insert event: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return ack, fmt.Errorf("insert event: %w", err)
	} else if n == 0 {
		return db.duplicateCritical(ctx, tx, ev)
	}
	if ack.Seq, err = res.LastInsertId(); err != nil {
		return ack, fmt.Errorf("insert event: %w", err)
	}

	switch p := req.payload.(type) {
	case *itemGrant:
		err = db.grantItem(ctx, tx, p, nowMs)
	case *itemMove:
		err = db.moveItem(ctx, tx, p, nowMs)
	case *itemSpend:
		err = db.spendItem(ctx, tx, p, nowMs)
	case *trade:
		for i := range p.Moves {
			if err = db.moveItem(ctx, tx, &p.Moves[i], nowMs); err != nil {
				break
			}
		}
	case *control.CharacterState:
		err = db.putCharacterState(ctx, tx, p, ev.EventID, nowMs)
	}
	return ack, err
}

// duplicateCritical answers a retried event id with its first commit, or ECONFLICT if the
// id was used for a different event.
func (db *DB) duplicateCritical(ctx context.Context, tx *sql.Tx, ev control.CriticalEvent) (control.CriticalAck, error) {
	var first control.CriticalEvent
	ack := control.CriticalAck{EventID: ev.EventID, Duplicate: true}
	var payload []byte
	if err := db.stmt(ctx, tx, sqlSelectEvent).QueryRowContext(ctx, ev.EventID).Scan(
		&ack.Seq, &first.InstanceID, &first.Kind, &first.MapTick, &payload, &ack.CommittedAtMs); err != nil {
		return control.CriticalAck{}, fmt.Errorf("read event: %w", err)
	}
	if first.InstanceID != ev.InstanceID || first.Kind != ev.Kind || first.MapTick != ev.MapTick || !bytes.Equal(payload, ev.Payload) {
		return control.CriticalAck{}, apierr.Errorf(apierr.ECONFLICT, "event id %q was already used for a different event", ev.EventID)
	}
	return ack, nil
}

// ownerArgs returns an owner as the two nullable owner columns.
func ownerArgs(o control.ItemOwner) (character, container sql.NullString) {
	return sql.NullString{String: o.CharacterID, Valid: o.CharacterID != ""},
		sql.NullString{String: o.ContainerID, Valid: o.ContainerID != ""}
}

// requireCharacter returns ENOTFOUND unless the owner is a container or a known character.
func (db *DB) requireCharacter(ctx context.Context, tx *sql.Tx, o control.ItemOwner) error {
	if o.CharacterID == "" {
		return nil
	}
	var one int
	err := db.stmt(ctx, tx, sqlCharExists).QueryRowContext(ctx, o.CharacterID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return apierr.Errorf(apierr.ENOTFOUND, "character %q not found", o.CharacterID)
	}
	return err
}

// readItem returns an item's owner and quantity, or ENOTFOUND.
func (db *DB) readItem(ctx context.Context, tx *sql.Tx, itemID string) (owner control.ItemOwner, qty int64, err error) {
	var kind string
	var ch, co sql.NullString
	err = db.stmt(ctx, tx, sqlReadItem).QueryRowContext(ctx, itemID).Scan(&kind, &ch, &co, &qty)
	if errors.Is(err, sql.ErrNoRows) {
		return owner, 0, apierr.Errorf(apierr.ENOTFOUND, "item %q not found", itemID)
	} else if err != nil {
		return owner, 0, fmt.Errorf("read item %q: %w", itemID, err)
	}
	return control.ItemOwner{CharacterID: ch.String, ContainerID: co.String}, qty, nil
}

// grantItem creates the item, or adds to it if it exists with the same kind and owner.
func (db *DB) grantItem(ctx context.Context, tx *sql.Tx, p *itemGrant, nowMs int64) error {
	if err := db.requireCharacter(ctx, tx, p.To); err != nil {
		return err
	}
	ch, co := ownerArgs(p.To)
	res, err := db.stmt(ctx, tx, sqlGrantItem).ExecContext(ctx, p.ItemID, p.ItemKind, ch, co, p.Quantity, nowMs)
	if err != nil {
		return fmt.Errorf("grant item %q: %w", p.ItemID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("grant item %q: %w", p.ItemID, err)
	} else if n == 0 {
		return apierr.Errorf(apierr.ECONFLICT, "item %q exists with another kind or owner", p.ItemID)
	}
	return nil
}

// moveItem gives a whole item to p.To if p.From holds it.
func (db *DB) moveItem(ctx context.Context, tx *sql.Tx, p *itemMove, nowMs int64) error {
	owner, _, err := db.readItem(ctx, tx, p.ItemID)
	if err != nil {
		return err
	} else if owner != p.From {
		return apierr.Errorf(apierr.ECONFLICT, "item %q is not held by the stated owner", p.ItemID)
	} else if err := db.requireCharacter(ctx, tx, p.To); err != nil {
		return err
	}
	ch, co := ownerArgs(p.To)
	_, err = db.stmt(ctx, tx, sqlMoveItem).ExecContext(ctx, ch, co, nowMs, p.ItemID)
	return err
}

// spendItem consumes quantity of an item p.From holds, deleting it at zero.
func (db *DB) spendItem(ctx context.Context, tx *sql.Tx, p *itemSpend, nowMs int64) error {
	owner, qty, err := db.readItem(ctx, tx, p.ItemID)
	if err != nil {
		return err
	} else if owner != p.From {
		return apierr.Errorf(apierr.ECONFLICT, "item %q is not held by the stated owner", p.ItemID)
	} else if qty < p.Quantity {
		return apierr.Errorf(apierr.ECONFLICT, "item %q has %d, cannot spend %d", p.ItemID, qty, p.Quantity)
	}
	if qty == p.Quantity {
		_, err = db.stmt(ctx, tx, sqlDeleteItem).ExecContext(ctx, p.ItemID)
	} else {
		_, err = db.stmt(ctx, tx, sqlSpendItem).ExecContext(ctx, p.Quantity, nowMs, p.ItemID)
	}
	return err
}

// CriticalEvent returns a committed critical event by id, or ENOTFOUND.
func (db *DB) CriticalEvent(ctx context.Context, eventID string) (*control.CriticalEvent, error) {
	ev := &control.CriticalEvent{EventID: eventID}
	var payload []byte
	err := db.read.QueryRowContext(ctx, `SELECT instance_id, kind, map_tick, payload FROM critical_events WHERE event_id = ?`, eventID).
		Scan(&ev.InstanceID, &ev.Kind, &ev.MapTick, &payload)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, apierr.Errorf(apierr.ENOTFOUND, "critical event %q not found", eventID)
	} else if err != nil {
		return nil, fmt.Errorf("read critical event %q: %w", eventID, err)
	}
	ev.Payload = payload
	return ev, nil
}

// Items returns the inventory held by owner, ordered by item id.
func (db *DB) Items(ctx context.Context, owner control.ItemOwner) ([]*orchestrator.Item, error) {
	if !owner.Valid() {
		return nil, apierr.Errorf(apierr.EBADREQUEST, "items: exactly one of characterId and containerId required")
	}
	col, id := "owner_character_id", owner.CharacterID
	if owner.ContainerID != "" {
		col, id = "owner_container_id", owner.ContainerID
	}
	rows, err := db.read.QueryContext(ctx, `SELECT item_id, item_kind, quantity, updated_at_ms FROM inventory_items WHERE `+col+` = ? ORDER BY item_id`, id)
	if err != nil {
		return nil, fmt.Errorf("list items: %w", err)
	}
	defer rows.Close()
	var items []*orchestrator.Item
	for rows.Next() {
		it := &orchestrator.Item{Owner: owner}
		var ms int64
		if err := rows.Scan(&it.ItemID, &it.ItemKind, &it.Quantity, &ms); err != nil {
			return nil, fmt.Errorf("scan item: %w", err)
		}
		it.UpdatedAt = fromMs(ms)
		items = append(items, it)
	}
	return items, rows.Err()
}
