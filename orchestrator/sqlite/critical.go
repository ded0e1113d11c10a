package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
)

// CommitCritical records c and applies its effects durably, then acknowledges it.
// Concurrent callers are group-committed by the writer goroutine. The store decides
// nothing about items: c.Items (the domain's rules) runs inside the transaction over
// the stored state, and the store writes what it returns. See
// orchestrator.CriticalEventStore for the error codes.
func (db *DB) CommitCritical(ctx context.Context, c orchestrator.CriticalCommit) (record.CriticalAck, error) {
	if c.Event.EventID == "" {
		return record.CriticalAck{}, apierr.Errorf(apierr.EBADREQUEST, "critical event: eventId required")
	}
	res := db.submit(ctx, &writeReq{evs: []orchestrator.CriticalCommit{c}})
	if res.err == nil {
		res.err = res.res[0].Err
	}
	if res.err != nil {
		return record.CriticalAck{}, fmt.Errorf("commit critical event %q: %w", c.Event.EventID, res.err)
	}
	return res.res[0].Ack, nil
}

// CommitCriticalBatch records the events of cs and applies their effects, in order, in
// one transaction of the writer's (with any other events waiting for it), each event
// on its own: one that fails is rolled back alone. It answers once they are durable.
// See orchestrator.CriticalEventStore for the error codes.
func (db *DB) CommitCriticalBatch(ctx context.Context, cs []orchestrator.CriticalCommit) []orchestrator.CriticalResult {
	out := make([]orchestrator.CriticalResult, len(cs))
	if len(cs) == 0 {
		return out
	}
	// Events refused before the writer sees them leave holes; the rest go as one request.
	ok := make([]orchestrator.CriticalCommit, 0, len(cs))
	idx := make([]int, 0, len(cs))
	for i, c := range cs {
		if c.Event.EventID == "" {
			out[i].Err = apierr.Errorf(apierr.EBADREQUEST, "critical event: eventId required")
			continue
		}
		ok, idx = append(ok, c), append(idx, i)
	}
	if len(ok) == 0 {
		return out
	}
	res := db.submit(ctx, &writeReq{evs: ok})
	for j, i := range idx {
		err := res.err
		if err == nil {
			out[i].Ack, err = res.res[j].Ack, res.res[j].Err
		}
		if err != nil {
			out[i] = orchestrator.CriticalResult{Err: fmt.Errorf("commit critical event %q: %w", cs[i].Event.EventID, err)}
		}
	}
	return out
}

// applyCritical records one event and applies its effects inside the writer's current
// transaction. A retried event id returns the first commit's ack and decides nothing.
func (db *DB) applyCritical(ctx context.Context, tx *sql.Tx, c *orchestrator.CriticalCommit, nowMs int64) (record.CriticalAck, error) {
	ev := c.Event
	ack := record.CriticalAck{EventID: ev.EventID, CommittedAtMs: nowMs}
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
	if c.Items != nil {
		out, err := c.Items(&txLedger{ctx: ctx, db: db, tx: tx})
		if err != nil {
			return ack, err
		}
		if err := db.writeItems(ctx, tx, out.Items, ack.Seq, nowMs); err != nil {
			return ack, err
		}
		if out.Recovery != nil {
			if err := db.insertRecovery(ctx, tx, ev, out, nowMs); err != nil {
				return ack, err
			}
		}
	}
	if c.Boundary != nil {
		if err := db.putCharacterState(ctx, tx, c.Boundary, ev.EventID, nowMs); err != nil {
			return ack, err
		}
	}
	return ack, nil
}

// duplicateCritical answers a retried event id with its first commit, or ECONFLICT if the
// id was used for a different event.
func (db *DB) duplicateCritical(ctx context.Context, tx *sql.Tx, ev record.CriticalEvent) (record.CriticalAck, error) {
	var first record.CriticalEvent
	ack := record.CriticalAck{EventID: ev.EventID, Duplicate: true}
	var payload []byte
	if err := db.stmt(ctx, tx, sqlSelectEvent).QueryRowContext(ctx, ev.EventID).Scan(
		&ack.Seq, &first.InstanceID, &first.Kind, &first.MapTick, &payload, &ack.CommittedAtMs); err != nil {
		return record.CriticalAck{}, fmt.Errorf("read event: %w", err)
	}
	if first.InstanceID != ev.InstanceID || first.Kind != ev.Kind || first.MapTick != ev.MapTick || !bytes.Equal(payload, ev.Payload) {
		return record.CriticalAck{}, apierr.Errorf(apierr.ECONFLICT, "event id %q was already used for a different event", ev.EventID)
	}
	return ack, nil
}

// requireCharacter returns ENOTFOUND unless characterID is a saved character.
func (db *DB) requireCharacter(ctx context.Context, tx *sql.Tx, characterID string) error {
	var one int
	err := db.stmt(ctx, tx, sqlCharExists).QueryRowContext(ctx, characterID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return apierr.Errorf(apierr.ENOTFOUND, "character %q not found", characterID)
	}
	return err
}

// CriticalEvent returns a committed critical event by id, or ENOTFOUND.
func (db *DB) CriticalEvent(ctx context.Context, eventID string) (*record.CriticalEvent, error) {
	ev := &record.CriticalEvent{EventID: eventID}
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
