package sqlite_test

import (
	"context"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// TestDB_MigrateItemLastEvent opens a database written before items knew their last
// critical event (migrations 0001 to 0008) and checks that the upgrade finds it in the
// events already recorded: the item an event moves, the items a trade gives back, the
// latest event when there are several, none for an item only seeded.
func TestDB_MigrateItemLastEvent(t *testing.T) {
	ctx := context.Background()
	path, raw, mustExec := oldSchema(t, 8)
	mustExec(`INSERT INTO characters (character_id, key_hash, name, name_key, created_at_ms) VALUES ('c1', 'kh1', 'Ada', 'ada', 5), ('c2', 'kh2', 'Bob', 'bob', 6)`)
	mustExec(`INSERT INTO inventory_items (item_id, template_id, quantity, owner_character_id, location_instance_id, updated_at_ms) VALUES
		('i1', 'coin', 4, 'c2', NULL, 9), ('i2', 'apple', 1, 'c1', NULL, 9), ('i3', 'apple', 1, NULL, 'm-1', 9)`)
	event := func(id, kind, payload string) {
		t.Helper()
		mustExec(`INSERT INTO critical_events (event_id, instance_id, kind, map_tick, payload, committed_at_ms) VALUES (?, 'm-1', ?, 7, ?, 11)`,
			id, kind, []byte(payload))
	}
	event("e1", "item_pickup", `{"itemId":"i1","templateId":"coin","quantity":4,"from":{"instanceId":"m-1"},"to":{"characterId":"c1"}}`)
	event("e2", "transfer_boundary", `{"characterId":"c1"}`)
	event("e3", "item_trade", `{"itemId":"i1","templateId":"coin","quantity":4,"from":{"characterId":"c1"},"to":{"characterId":"c2"},`+
		`"exchange":[{"itemId":"i2","templateId":"apple","quantity":1,"from":{"characterId":"c2"},"to":{"characterId":"c1"}}]}`)
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}

	db := MustOpenDBAt(t, path)
	for item, want := range map[string]string{"i1": "e3", "i2": "e3", "i3": ""} {
		rec, err := db.ItemRecord(ctx, item)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case want == "" && rec.LastEvent != nil:
			t.Errorf("%s: last event %+v, want none", item, rec.LastEvent)
		case want != "" && (rec.LastEvent == nil || rec.LastEvent.EventID != want || rec.LastEvent.Kind != "item_trade"):
			t.Errorf("%s: last event %+v, want %s", item, rec.LastEvent, want)
		}
	}
	if rec, _ := db.ItemRecord(ctx, "i1"); rec.Holder != "c2" {
		t.Errorf("i1 held by %q, want c2", rec.Holder)
	}
	_, err := db.ItemRecord(ctx, "nope")
	WantCode(t, err, apierr.ENOTFOUND)
	_, err = db.HeldItemRecords(ctx, "nobody")
	WantCode(t, err, apierr.ENOTFOUND)
	if held, err := db.HeldItemRecords(ctx, "c1"); err != nil || len(held) != 1 || held[0].ID != "i2" {
		t.Fatalf("held by c1: %+v %v", held, err)
	}
	if err := db.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
}
