package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/apierr"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
)

func TestDB_Characters(t *testing.T) {
	ctx := context.Background()
	t.Run("CreateAndFind", func(t *testing.T) {
		now := time.UnixMilli(1700000000123)
		db := MustOpenDB(t, func(db *sqlite.DB) { db.Now = func() time.Time { return now } })
		c := &orchestrator.Character{KeyHash: "kh1", Name: "Ada"}
		if err := db.CreateCharacter(ctx, c); err != nil {
			t.Fatal(err)
		}
		if c.ID == "" || !c.CreatedAt.Equal(now) {
			t.Fatalf("character=%+v", c)
		}
		got, err := db.FindCharacterByKeyHash(ctx, "kh1")
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != c.ID || got.Name != "Ada" || !got.CreatedAt.Equal(now) {
			t.Fatalf("found=%+v, want %+v", got, c)
		}
	})
	t.Run("ErrConflictKeyHash", func(t *testing.T) {
		db := MustOpenDB(t)
		if err := db.CreateCharacter(ctx, &orchestrator.Character{KeyHash: "kh1"}); err != nil {
			t.Fatal(err)
		}
		WantCode(t, db.CreateCharacter(ctx, &orchestrator.Character{KeyHash: "kh1"}), apierr.ECONFLICT)
	})
	t.Run("ErrBadRequestNoKeyHash", func(t *testing.T) {
		WantCode(t, MustOpenDB(t).CreateCharacter(ctx, &orchestrator.Character{Name: "x"}), apierr.EBADREQUEST)
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		db := MustOpenDB(t)
		_, err := db.FindCharacterByKeyHash(ctx, "nope")
		WantCode(t, err, apierr.ENOTFOUND)
		_, err = db.CharacterState(ctx, "nope")
		WantCode(t, err, apierr.ENOTFOUND)
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

// TestDB_RekeyCharacter checks the move of a character to a new key hash after a root
// rotation: once, and only from the hash it has.
func TestDB_RekeyCharacter(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	c := &orchestrator.Character{KeyHash: "old-hash", Name: "ada"}
	if err := db.CreateCharacter(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := db.RekeyCharacter(ctx, c.ID, "old-hash", "new-hash"); err != nil {
		t.Fatal(err)
	}
	if got, err := db.FindCharacterByKeyHash(ctx, "new-hash"); err != nil || got.ID != c.ID {
		t.Fatalf("under the new hash: %+v %v", got, err)
	}
	WantCode(t, db.RekeyCharacter(ctx, c.ID, "old-hash", "newer-hash"), apierr.ENOTFOUND)
	_, err := db.FindCharacterByKeyHash(ctx, "old-hash")
	WantCode(t, err, apierr.ENOTFOUND)
}

func TestDB_UseNonce(t *testing.T) {
	ctx := context.Background()
	now := time.UnixMilli(1700000000000)
	clock := func() time.Time { return now }
	t.Run("ErrTicketUsed", func(t *testing.T) {
		db := MustOpenDB(t, func(db *sqlite.DB) { db.Now = clock })
		if err := db.UseNonce(ctx, "n1", now.Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		WantCode(t, db.UseNonce(ctx, "n1", now.Add(10*time.Second)), apierr.ETICKETUSED)
		if err := db.UseNonce(ctx, "n2", now.Add(10*time.Second)); err != nil {
			t.Fatalf("other nonce: %v", err)
		}
	})
	t.Run("UsedAcrossRestart", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "mapyard.db")
		db := sqlite.NewDB(path)
		db.Now = clock
		if err := db.Open(); err != nil {
			t.Fatal(err)
		}
		if err := db.UseNonce(ctx, "n1", now.Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		db2 := MustOpenDBAt(t, path, func(db *sqlite.DB) { db.Now = clock }) // db never closed: a crash
		WantCode(t, db2.UseNonce(ctx, "n1", now.Add(10*time.Second)), apierr.ETICKETUSED)
		db.Close()
	})
	t.Run("PruneForgetsOnlyExpired", func(t *testing.T) {
		at := now
		db := MustOpenDB(t, func(db *sqlite.DB) { db.Now = func() time.Time { return at } })
		if err := db.UseNonce(ctx, "old", now.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := db.UseNonce(ctx, "fresh", now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		at = now.Add(2 * time.Second)
		if n, err := db.PruneNonces(ctx); err != nil || n != 1 {
			t.Fatalf("pruned %d, %v; want 1", n, err)
		}
		WantCode(t, db.UseNonce(ctx, "fresh", now.Add(time.Minute)), apierr.ETICKETUSED)
	})
	t.Run("ErrBadRequestEmpty", func(t *testing.T) {
		WantCode(t, MustOpenDB(t).UseNonce(ctx, "", now), apierr.EBADREQUEST)
	})
}
