package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
)

// mustWrite runs one statement on a writable connection of its own, as someone editing
// the file outside the orchestrator would.
func mustWrite(tb testing.TB, path, query string, args ...any) {
	tb.Helper()
	raw, err := sql.Open("sqlite", sqlite.DSN(path, false))
	if err != nil {
		tb.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(query, args...); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
}

// TestDB_SavedStateVersions checks that a checkpointed character state carries its
// schema version, simulation build and hash, that every save appends an audit row of
// which only the newest SaveAuditKeep are kept, and that a state whose content no
// longer matches its hash, or whose schema cannot be migrated, is refused with
// state_incompatible while an older schema with a migration is upgraded.
func TestDB_SavedStateVersions(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mapyard.db")
	db := MustOpenDBAt(t, path, func(db *sqlite.DB) { db.SaveAuditKeep = 2 })
	MustCharacter(t, db, "ada")
	for rev := int64(1); rev <= 3; rev++ {
		MustPut(t, db, "i1", "character:ada", rev, `{"mapId":"meadow","instanceId":"i1","x":`+string(rune('0'+rev))+`}`, true)
		if _, err := db.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	raw := MustRawDB(t, path)
	var schema int
	var sim, hash string
	if err := raw.QueryRow(`SELECT schema_version, sim_core_version, state_hash FROM character_state WHERE character_id = 'ada'`).
		Scan(&schema, &sim, &hash); err != nil {
		t.Fatal(err)
	}
	if schema != record.SnapshotSchemaVersion || sim != "sim-1" || len(hash) != 64 {
		t.Fatalf("saved row: schema %d, sim %q, hash %q", schema, sim, hash)
	}
	t.Run("AuditWindow", func(t *testing.T) {
		audit, err := db.CharacterSaves(ctx, "ada")
		if err != nil {
			t.Fatal(err)
		}
		if len(audit) != 2 || audit[0].Revision != 3 || audit[1].Revision != 2 || audit[0].Source != "checkpoint" ||
			audit[0].StateHash != hash || audit[0].SimCoreVersion != "sim-1" {
			t.Fatalf("audit=%+v, want revisions 3 and 2 of checkpoints", audit)
		}
		w, err := sql.Open("sqlite", sqlite.DSN(path, false))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err = w.Exec(`UPDATE character_saves SET revision = 9`); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Fatalf("audit rows changed: %v", err)
		}
	})
	t.Run("TransferBoundaryAudited", func(t *testing.T) {
		payload, _ := json.Marshal(record.CharacterState{CharacterID: "ada", MapID: "forest", InstanceID: "forest-1", X: 5, Revision: 10})
		MustCommit(t, db, record.CriticalEvent{EventID: "tb-1", InstanceID: "i1", Kind: record.EventTransferBoundary, Payload: payload})
		audit, _ := db.CharacterSaves(ctx, "ada")
		if len(audit) != 2 || audit[0].Source != "transfer_boundary" || audit[0].Ref != "tb-1" || audit[0].MapID != "forest" {
			t.Fatalf("audit=%+v, want the transfer boundary first", audit)
		}
	})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	t.Run("ErrStateIncompatibleHash", func(t *testing.T) {
		mustWrite(t, path, `UPDATE character_state SET x = 99 WHERE character_id = 'ada'`)
		db := MustOpenDBAt(t, path)
		_, err := db.CharacterState(ctx, "ada")
		WantCode(t, err, apierr.ESTATEINCOMPATIBLE)
		mustWrite(t, path, `UPDATE character_state SET x = 5 WHERE character_id = 'ada'`)
	})
	t.Run("ErrStateIncompatibleSchema", func(t *testing.T) {
		mustWrite(t, path, `UPDATE character_state SET schema_version = 7, state_hash = '' WHERE character_id = 'ada'`)
		db := MustOpenDBAt(t, path)
		_, err := db.CharacterState(ctx, "ada")
		WantCode(t, err, apierr.ESTATEINCOMPATIBLE)
		mustWrite(t, path, `UPDATE character_state SET schema_version = 1 WHERE character_id = 'ada'`)
	})
	t.Run("OlderSchemaMigrated", func(t *testing.T) {
		db := MustOpenDBAt(t, path, func(db *sqlite.DB) {
			db.SchemaVersion = 2
			db.SnapshotMigrations = map[int]record.SnapshotMigration{1: func(p json.RawMessage) (json.RawMessage, error) {
				var m map[string]any
				if err := json.Unmarshal(p, &m); err != nil {
					return nil, err
				}
				m["attributes"] = map[string]any{"migrated": true}
				return json.Marshal(m)
			}}
		})
		s, err := db.CharacterState(ctx, "ada")
		if err != nil {
			t.Fatal(err)
		}
		if s.MapID != "forest" || s.X != 5 || string(s.Attributes) != `{"migrated":true}` {
			t.Fatalf("migrated state=%+v %s", s, s.Attributes)
		}
	})
}
