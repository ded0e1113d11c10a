package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
)

// MustCreate creates a character named name for keyHash with no cap.
func MustCreate(tb testing.TB, db *sqlite.DB, keyHash, name string) *orchestrator.Character {
	tb.Helper()
	c := &orchestrator.Character{KeyHash: keyHash, Name: name}
	if err := db.CreateCharacter(context.Background(), c, 0); err != nil {
		tb.Fatal(err)
	}
	return c
}

func TestDB_Characters(t *testing.T) {
	ctx := context.Background()
	t.Run("CreateListSelect", func(t *testing.T) {
		now := time.UnixMilli(1700000000123)
		db := MustOpenDB(t, func(db *sqlite.DB) { db.Now = func() time.Time { return now } })
		ada := MustCreate(t, db, "kh1", "Ada")
		if ada.ID == "" || !ada.CreatedAt.Equal(now) || !ada.Selected {
			t.Fatalf("first character=%+v, want selected", ada)
		}
		now = now.Add(time.Millisecond)
		bob := MustCreate(t, db, "kh1", "Bob")
		if bob.Selected {
			t.Fatal("the second character was selected on creation")
		}
		MustCreate(t, db, "kh2", "Ada") // a name is unique per identity only
		list, err := db.Characters(ctx, "kh1")
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].ID != ada.ID || !list[0].Selected || list[1].ID != bob.ID || list[1].Selected {
			t.Fatalf("list=%+v %+v", list[0], list[1])
		}
		if err := db.SelectCharacter(ctx, "kh1", bob.ID); err != nil {
			t.Fatal(err)
		}
		if got, err := db.SelectedCharacter(ctx, "kh1"); err != nil || got.ID != bob.ID || got.Name != "Bob" {
			t.Fatalf("selected=%+v %v, want Bob", got, err)
		}
		if list, _ = db.Characters(ctx, "kh1"); list[0].Selected || !list[1].Selected {
			t.Fatalf("after select: %+v %+v", list[0], list[1])
		}
		if list, err = db.Characters(ctx, "nobody"); err != nil || list == nil || len(list) != 0 {
			t.Fatalf("an identity with none: %v %v, want an empty list", list, err)
		}
	})
	t.Run("SameMillisecondListsInCreationOrder", func(t *testing.T) {
		now := time.UnixMilli(1700000000123)
		db := MustOpenDB(t, func(db *sqlite.DB) { db.Now = func() time.Time { return now } })
		var want []string
		for _, n := range []string{"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"} {
			want = append(want, MustCreate(t, db, "kh1", n).ID)
		}
		list, err := db.Characters(ctx, "kh1")
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range list {
			if c.ID != want[i] || c.Selected != (i == 0) {
				t.Fatalf("characters created in one millisecond listed out of creation order: %d is %s (%s), want %s", i, c.ID, c.Name, want[i])
			}
		}
		if got, err := db.SelectedCharacter(ctx, "kh1"); err != nil || got.ID != want[0] {
			t.Fatalf("selected %+v %v, want the first created", got, err)
		}
	})
	t.Run("ErrBadRequestDuplicateName", func(t *testing.T) {
		db := MustOpenDB(t)
		MustCreate(t, db, "kh1", "Ada")
		WantCode(t, db.CreateCharacter(ctx, &orchestrator.Character{KeyHash: "kh1", Name: "ADA"}, 0), apierr.EBADREQUEST)
	})
	t.Run("ErrCharacterLimit", func(t *testing.T) {
		db := MustOpenDB(t)
		for _, n := range []string{"a", "b"} {
			if err := db.CreateCharacter(ctx, &orchestrator.Character{KeyHash: "kh1", Name: n}, 2); err != nil {
				t.Fatal(err)
			}
		}
		WantCode(t, db.CreateCharacter(ctx, &orchestrator.Character{KeyHash: "kh1", Name: "c"}, 2), apierr.ECHARACTERLIMIT)
	})
	t.Run("ErrConflictID", func(t *testing.T) {
		db := MustOpenDB(t)
		MustCharacter(t, db, "ada")
		WantCode(t, db.CreateCharacter(ctx, &orchestrator.Character{ID: "ada", KeyHash: "kh9", Name: "x"}, 0), apierr.ECONFLICT)
	})
	t.Run("ErrBadRequestNoKeyHash", func(t *testing.T) {
		WantCode(t, MustOpenDB(t).CreateCharacter(ctx, &orchestrator.Character{Name: "x"}, 0), apierr.EBADREQUEST)
	})
	t.Run("ErrNotFoundOthersCharacter", func(t *testing.T) {
		db := MustOpenDB(t)
		mine := MustCreate(t, db, "kh1", "Ada")
		for _, id := range []string{mine.ID, "no-such-id"} {
			_, err := db.OwnedCharacter(ctx, "kh2", id)
			WantCode(t, err, apierr.ENOTFOUND)
			WantCode(t, db.SelectCharacter(ctx, "kh2", id), apierr.ENOTFOUND)
			WantCode(t, db.DeleteCharacter(ctx, "kh2", id), apierr.ENOTFOUND)
		}
		if _, err := db.OwnedCharacter(ctx, "kh1", mine.ID); err != nil {
			t.Fatalf("the owner's own: %v", err)
		}
		_, err := db.SelectedCharacter(ctx, "kh2")
		WantCode(t, err, apierr.ENOTFOUND)
		_, err = db.CharacterState(ctx, "nope")
		WantCode(t, err, apierr.ENOTFOUND)
	})
	t.Run("DeleteRemovesStateItemsAndLease", func(t *testing.T) {
		db := MustOpenDB(t)
		ada := MustCreate(t, db, "kh1", "Ada")
		bob := MustCreate(t, db, "kh1", "Bob")
		MustPut(t, db, "i1", record.CharacterPartition(ada.ID), 1, `{"mapId":"meadow","instanceId":"i1"}`, true)
		if _, err := db.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := mustWritableDB(t, db.Path).Exec(`INSERT INTO inventory_items (item_id, template_id, quantity, owner_character_id, updated_at_ms)
			VALUES ('sword-1', 'sword', 1, ?, 0)`, ada.ID); err != nil {
			t.Fatal(err)
		}
		if err := db.SetLease(ctx, orchestrator.Lease{CharacterID: ada.ID, InstanceID: "i1", Epoch: 1}, 0); err != nil {
			t.Fatal(err)
		}
		if err := db.DeleteCharacter(ctx, "kh1", ada.ID); err != nil {
			t.Fatal(err)
		}
		raw := MustRawDB(t, db.Path)
		for _, q := range []string{`SELECT COUNT(*) FROM characters WHERE character_id = ?`, `SELECT COUNT(*) FROM character_state WHERE character_id = ?`,
			`SELECT COUNT(*) FROM inventory_items WHERE owner_character_id = ?`, `SELECT COUNT(*) FROM authority_leases WHERE character_id = ?`,
			`SELECT COUNT(*) FROM instance_partitions WHERE partition = 'character:' || ?`} {
			if n := MustCount(t, raw, q, ada.ID); n != 0 {
				t.Errorf("%s: %d rows left", q, n)
			}
		}
		if _, err := db.CharacterState(ctx, ada.ID); apierr.Code(err) != apierr.ENOTFOUND {
			t.Errorf("state after delete: %v", err)
		}
		// The selection falls back to the remaining character.
		if got, err := db.SelectedCharacter(ctx, "kh1"); err != nil || got.ID != bob.ID {
			t.Fatalf("selected after delete=%+v %v, want Bob", got, err)
		}
	})
	t.Run("StateFromCheckpointAfterReopen", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "mapyard.db")
		db := sqlite.NewDB(path)
		if err := db.Open(); err != nil {
			t.Fatal(err)
		}
		MustCharacter(t, db, "ada")
		MustPut(t, db, "i1", "character:ada", 2, `{"mapId":"meadow","instanceId":"i1","x":10,"y":20,"attributes":{"lvl":3}}`, true)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db = MustOpenDBAt(t, path)
		s, err := db.CharacterState(ctx, "ada")
		if err != nil {
			t.Fatal(err)
		}
		if s.MapID != "meadow" || s.X != 10 || s.Y != 20 || s.Revision != 2 || string(s.Attributes) != `{"lvl":3}` {
			t.Fatalf("state=%+v", s)
		}
		if list, _ := db.Characters(ctx, "hash-ada"); len(list) != 1 || list[0].MapID != "meadow" {
			t.Fatalf("list=%+v, want the saved map", list)
		}
	})
	t.Run("DisposableCharacterNotSaved", func(t *testing.T) {
		db := MustOpenDB(t)
		MustPut(t, db, "i1", "character:session-1", 1, `{"mapId":"meadow","instanceId":"i1"}`, true)
		if _, err := db.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		raw := MustRawDB(t, db.Path)
		if got := MustCount(t, raw, `SELECT COUNT(*) FROM character_state`); got != 0 {
			t.Fatalf("character_state rows=%d for an unknown character", got)
		}
	})
}

// TestDB_RekeyIdentity checks the move of an identity's characters to a new key hash
// after a root rotation: all of them with the selection, once.
func TestDB_RekeyIdentity(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	MustCreate(t, db, "old-hash", "ada")
	bob := MustCreate(t, db, "old-hash", "bob")
	if err := db.SelectCharacter(ctx, "old-hash", bob.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := db.RekeyIdentity(ctx, "old-hash", "new-hash"); err != nil || n != 2 {
		t.Fatalf("moved %d, %v; want 2", n, err)
	}
	if got, err := db.SelectedCharacter(ctx, "new-hash"); err != nil || got.ID != bob.ID {
		t.Fatalf("selected under the new hash: %+v %v", got, err)
	}
	if n, err := db.RekeyIdentity(ctx, "old-hash", "new-hash"); err != nil || n != 0 {
		t.Fatalf("second move: %d, %v; want 0", n, err)
	}
	_, err := db.SelectedCharacter(ctx, "old-hash")
	WantCode(t, err, apierr.ENOTFOUND)
}

// TestDB_MigrateOneCharacterPerKey opens a database written by the schema before
// several characters per identity (migrations 0001 to 0005, key_hash unique) and checks
// that the upgrade keeps every character with its state and inventory, selected, and
// then lets the identity create more.
func TestDB_MigrateOneCharacterPerKey(t *testing.T) {
	ctx := context.Background()
	path, raw, mustExec := oldSchema(t, 5)
	mustExec(`INSERT INTO characters (character_id, key_hash, name, created_at_ms) VALUES ('c1', 'kh1', 'Ada', 5), ('c2', 'kh2', 'Bob', 6)`)
	mustExec(`INSERT INTO character_state (character_id, map_id, instance_id, x, y, attributes_json, revision, updated_at_ms)
		VALUES ('c1', 'meadow', 'meadow-1', 1.5, 2.5, '{"hp":7}', 3, 9)`)
	mustExec(`INSERT INTO inventory_items (item_id, item_kind, owner_character_id, quantity, updated_at_ms) VALUES ('i1', 'coin', 'c1', 4, 9)`)
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}

	db := MustOpenDBAt(t, path)
	list, err := db.Characters(ctx, "kh1")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != "c1" || list[0].Name != "Ada" || !list[0].Selected || list[0].MapID != "meadow" {
		t.Fatalf("after the upgrade: %+v", list)
	}
	s, err := db.CharacterState(ctx, "c1")
	if err != nil || s.X != 1.5 || s.Revision != 3 || string(s.Attributes) != `{"hp":7}` {
		t.Fatalf("state after the upgrade: %+v %v", s, err)
	}
	if items, err := db.CharacterItems(ctx, "c1"); err != nil || len(items) != 1 || items[0].Quantity != 4 {
		t.Fatalf("items after the upgrade: %+v %v", items, err)
	}
	MustCreate(t, db, "kh1", "Cy")
	WantCode(t, db.CreateCharacter(ctx, &orchestrator.Character{KeyHash: "kh1", Name: "ada"}, 0), apierr.EBADREQUEST)
	if err := db.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
}

// mustWritableDB opens path for writing beside the store, to plant rows a test needs.
func mustWritableDB(tb testing.TB, path string) *sql.DB {
	tb.Helper()
	raw, err := sql.Open("sqlite", sqlite.DSN(path, false))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { raw.Close() })
	return raw
}
