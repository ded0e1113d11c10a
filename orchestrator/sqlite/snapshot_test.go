package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
)

// Envelope returns a valid envelope for payload.
func Envelope(payload string) record.SnapshotEnvelope {
	return record.NewSnapshotEnvelope("sim-1", 100, 1700000000000, json.RawMessage(payload))
}

// MustPut puts a snapshot and fails the test unless its acceptance is want.
func MustPut(tb testing.TB, db *sqlite.DB, instanceID, partition string, revision int64, payload string, want bool) {
	tb.Helper()
	got, err := db.PutSnapshot(context.Background(), instanceID, partition, revision, Envelope(payload))
	if err != nil {
		tb.Fatal(err)
	} else if got != want {
		tb.Fatalf("put %s/%s@%d accepted=%v, want %v", instanceID, partition, revision, got, want)
	}
}

// WantRevision fails the test unless the cached partition is at revision with payload.
func WantRevision(tb testing.TB, db *sqlite.DB, instanceID, partition string, revision int64, payload string) {
	tb.Helper()
	s, err := db.Snapshot(context.Background(), instanceID, partition)
	if err != nil {
		tb.Fatal(err)
	}
	if s.Revision != revision || string(s.Envelope.Payload) != payload {
		tb.Fatalf("snapshot=%d %s, want %d %s", s.Revision, s.Envelope.Payload, revision, payload)
	}
}

func TestDB_PutSnapshot(t *testing.T) {
	ctx := context.Background()
	t.Run("NewerRevisionWins", func(t *testing.T) {
		db := MustOpenDB(t)
		MustPut(t, db, "i1", "world", 1, `{"n":1}`, true)
		MustPut(t, db, "i1", "world", 2, `{"n":2}`, true)
		WantRevision(t, db, "i1", "world", 2, `{"n":2}`)
	})
	t.Run("DuplicateRevisionIgnored", func(t *testing.T) {
		db := MustOpenDB(t)
		MustPut(t, db, "i1", "world", 5, `{"n":5}`, true)
		MustPut(t, db, "i1", "world", 5, `{"n":"other"}`, false)
		WantRevision(t, db, "i1", "world", 5, `{"n":5}`)
	})
	t.Run("OutOfOrderRevisionIgnored", func(t *testing.T) {
		db := MustOpenDB(t)
		MustPut(t, db, "i1", "world", 7, `{"n":7}`, true)
		MustPut(t, db, "i1", "world", 3, `{"n":3}`, false)
		WantRevision(t, db, "i1", "world", 7, `{"n":7}`)
		if _, err := db.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		MustPut(t, db, "i1", "world", 6, `{"n":6}`, false) // also after a checkpoint
		WantRevision(t, db, "i1", "world", 7, `{"n":7}`)
	})
	t.Run("PartitionsIndependent", func(t *testing.T) {
		db := MustOpenDB(t)
		MustPut(t, db, "i1", "a", 9, `{"p":"a"}`, true)
		MustPut(t, db, "i1", "b", 1, `{"p":"b"}`, true)
		MustPut(t, db, "i2", "a", 1, `{"p":"i2a"}`, true)
		WantRevision(t, db, "i1", "b", 1, `{"p":"b"}`)
		WantRevision(t, db, "i2", "a", 1, `{"p":"i2a"}`)
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := MustOpenDB(t).Snapshot(ctx, "i1", "nope")
		WantCode(t, err, apierr.ENOTFOUND)
	})
}

func TestDB_PutSnapshot_BadInput(t *testing.T) {
	ctx := context.Background()
	good := Envelope(`{"a":1}`)
	big := `{"x":"` + strings.Repeat("a", 1024) + `"}`
	for _, tc := range []struct {
		name, instance, partition string
		revision                  int64
		env                       record.SnapshotEnvelope
		code                      string
	}{
		{"ErrMalformedPayload", "i1", "world", 1, Envelope(`{"a":`), apierr.EINVALIDENVELOPE},
		{"ErrPayloadNotObject", "i1", "world", 1, Envelope(`[1,2]`), apierr.EINVALIDENVELOPE},
		{"ErrEmptyPayload", "i1", "world", 1, Envelope(``), apierr.EINVALIDENVELOPE},
		{"ErrHashMismatch", "i1", "world", 1, func() record.SnapshotEnvelope {
			e := good
			e.Payload = json.RawMessage(`{"a":2}`)
			return e
		}(), apierr.EHASHMISMATCH},
		{"ErrMalformedHash", "i1", "world", 1, func() record.SnapshotEnvelope {
			e := good
			e.PayloadHash = "xyz"
			return e
		}(), apierr.EINVALIDENVELOPE},
		{"ErrUppercaseHash", "i1", "world", 1, func() record.SnapshotEnvelope {
			e := good
			e.PayloadHash = strings.ToUpper(e.PayloadHash)
			return e
		}(), apierr.EINVALIDENVELOPE},
		{"ErrSimCoreVersionMissing", "i1", "world", 1, func() record.SnapshotEnvelope {
			e := good
			e.SimCoreVersion = ""
			return e
		}(), apierr.EINVALIDENVELOPE},
		{"ErrUnknownSchemaVersion", "i1", "world", 1, func() record.SnapshotEnvelope {
			e := good
			e.SchemaVersion = record.SnapshotSchemaVersion + 1
			return e
		}(), apierr.ESCHEMAVERSION},
		{"ErrSchemaVersionZero", "i1", "world", 1, func() record.SnapshotEnvelope {
			e := good
			e.SchemaVersion = 0
			return e
		}(), apierr.ESCHEMAVERSION},
		{"ErrTooLarge", "i1", "world", 1, Envelope(big), apierr.ETOOLARGE},
		{"ErrNoInstance", "", "world", 1, good, apierr.EBADREQUEST},
		{"ErrNoPartition", "i1", "", 1, good, apierr.EBADREQUEST},
		{"ErrZeroRevision", "i1", "world", 0, good, apierr.EBADREQUEST},
		{"ErrCharacterPartitionShape", "i1", "character:c1", 1, Envelope(`{"x":1}`), apierr.EINVALIDENVELOPE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := MustOpenDB(t, func(db *sqlite.DB) { db.MaxPayloadBytes = 1024 })
			MustPut(t, db, "i1", "other", 1, `{"keep":true}`, true)
			if _, err := db.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
			accepted, err := db.PutSnapshot(ctx, tc.instance, tc.partition, tc.revision, tc.env)
			WantCode(t, err, tc.code)
			if accepted {
				t.Fatal("accepted bad input")
			}
			if _, err := db.Snapshot(ctx, tc.instance, tc.partition); apierr.Code(err) != apierr.ENOTFOUND {
				t.Fatalf("bad snapshot reached the cache: %v", err)
			}
			if res, err := db.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			} else if res.ID != 0 {
				t.Fatalf("checkpoint %d wrote %d rows after bad input", res.ID, res.Rows)
			}
			raw := MustRawDB(t, db.Path)
			if got, want := MustCount(t, raw, `SELECT COUNT(*) FROM instance_partitions`), 1; got != want {
				t.Fatalf("partitions=%d, want %d", got, want)
			}
		})
	}
}

func TestDB_Checkpoint(t *testing.T) {
	ctx := context.Background()
	t.Run("SurvivesReopen", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "mapyard.db")
		db := sqlite.NewDB(path)
		if err := db.Open(); err != nil {
			t.Fatal(err)
		}
		MustPut(t, db, "i1", "world", 3, `{"n":3}`, true)
		res, err := db.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		} else if res.ID == 0 || res.Rows != 1 {
			t.Fatalf("checkpoint=%+v, want one row", res)
		}
		if res, err := db.Checkpoint(ctx); err != nil || res.ID != 0 {
			t.Fatalf("empty checkpoint=%+v, %v; want none", res, err)
		}
		MustPut(t, db, "i1", "world", 4, `{"n":4}`, true) // flushed by Close
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		db = MustOpenDBAt(t, path)
		WantRevision(t, db, "i1", "world", 4, `{"n":4}`)
		MustPut(t, db, "i1", "world", 4, `{"n":"replayed"}`, false)
		if rec := db.Recovery(); rec.CheckpointID != 2 || rec.Partitions != 1 {
			t.Fatalf("recovery=%+v, want checkpoint 2 with 1 partition", rec)
		}
		raw := MustRawDB(t, path)
		if got, want := MustCount(t, raw, `SELECT COUNT(*) FROM audit_log WHERE kind = 'checkpoint'`), 2; got != want {
			t.Fatalf("checkpoint audit rows=%d, want %d", got, want)
		}
	})
	t.Run("UncheckpointedLostOnCrashOnly", func(t *testing.T) {
		// A DB that is never closed stands for a crashed process: what the last
		// checkpoint wrote is back, what came after it is not.
		path := filepath.Join(t.TempDir(), "mapyard.db")
		crashed := sqlite.NewDB(path)
		crashed.CheckpointInterval = -1
		if err := crashed.Open(); err != nil {
			t.Fatal(err)
		}
		MustPut(t, crashed, "i1", "world", 1, `{"n":1}`, true)
		if _, err := crashed.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		MustPut(t, crashed, "i1", "world", 2, `{"n":2}`, true)

		db := MustOpenDBAt(t, path)
		WantRevision(t, db, "i1", "world", 1, `{"n":1}`)
	})
	t.Run("ErrPutAfterClose", func(t *testing.T) {
		db := sqlite.NewDB(filepath.Join(t.TempDir(), "mapyard.db"))
		if err := db.Open(); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		_, err := db.PutSnapshot(ctx, "i1", "world", 1, Envelope(`{}`))
		WantCode(t, err, apierr.EUNAVAILABLE)
	})
	t.Run("Timer", func(t *testing.T) {
		db := MustOpenDB(t, func(db *sqlite.DB) { db.CheckpointInterval = 10 * time.Millisecond })
		MustPut(t, db, "i1", "world", 1, `{"n":1}`, true)
		raw := MustRawDB(t, db.Path)
		deadline := time.Now().Add(5 * time.Second)
		for MustCount(t, raw, `SELECT COUNT(*) FROM instance_partitions`) != 1 {
			if time.Now().After(deadline) {
				t.Fatal("timer never checkpointed")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	t.Run("ManyPartitionsOneCheckpoint", func(t *testing.T) {
		// More partitions than one checkpoint transaction writes: still one checkpoint.
		db := MustOpenDB(t)
		for i := 0; i < 2500; i++ {
			MustPut(t, db, fmt.Sprintf("i%d", i%5), fmt.Sprintf("p%d", i), 1, `{}`, true)
		}
		res, err := db.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		} else if res.Rows != 2500 || res.ID != 1 {
			t.Fatalf("checkpoint=%+v, want #1 with 2500 rows", res)
		}
		raw := MustRawDB(t, db.Path)
		if got := MustCount(t, raw, `SELECT COUNT(*) FROM instance_partitions WHERE checkpoint_id = ?`, res.ID); got != 2500 {
			t.Fatalf("rows in checkpoint=%d, want 2500", got)
		}
		if got := MustCount(t, raw, `SELECT COUNT(*) FROM checkpoints`); got != 1 {
			t.Fatalf("checkpoints=%d, want 1", got)
		}
		if res, err := db.Checkpoint(ctx); err != nil || res.ID != 0 {
			t.Fatalf("second checkpoint=%+v, %v; want nothing pending", res, err)
		}
	})
}

// renameHP is a schema 1 -> 2 migration used by the tests: it renames "hp" to "health".
func renameHP(payload json.RawMessage) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(payload, &m); err != nil {
		return nil, err
	}
	m["health"] = m["hp"]
	delete(m, "hp")
	return json.Marshal(m)
}

func TestDB_PutSnapshot_SchemaMigration(t *testing.T) {
	ctx := context.Background()
	v2 := func(db *sqlite.DB) {
		db.SchemaVersion = 2
		db.SnapshotMigrations = map[int]record.SnapshotMigration{1: renameHP}
	}
	t.Run("OlderVersionMigrated", func(t *testing.T) {
		db := MustOpenDB(t, v2)
		MustPut(t, db, "i1", "world", 1, `{"hp":3}`, true) // Envelope stamps version 1
		s, err := db.Snapshot(ctx, "i1", "world")
		if err != nil {
			t.Fatal(err)
		}
		env := s.Envelope
		if env.SchemaVersion != 2 || string(env.Payload) != `{"health":3}` || env.PayloadHash != record.PayloadHash(env.Payload) {
			t.Fatalf("envelope=%+v payload=%s, want version 2 {\"health\":3} with its hash", env, env.Payload)
		}
	})
	t.Run("ErrSchemaVersionNoMigration", func(t *testing.T) {
		db := MustOpenDB(t, func(db *sqlite.DB) { db.SchemaVersion = 2 })
		_, err := db.PutSnapshot(ctx, "i1", "world", 1, Envelope(`{"hp":3}`))
		WantCode(t, err, apierr.ESCHEMAVERSION)
	})
	t.Run("ErrSchemaVersionNewer", func(t *testing.T) {
		db := MustOpenDB(t, v2)
		env := Envelope(`{"hp":3}`)
		env.SchemaVersion = 3
		_, err := db.PutSnapshot(ctx, "i1", "world", 1, env)
		WantCode(t, err, apierr.ESCHEMAVERSION)
	})
	t.Run("ErrMigrationFails", func(t *testing.T) {
		db := MustOpenDB(t, func(db *sqlite.DB) {
			db.SchemaVersion = 2
			db.SnapshotMigrations = map[int]record.SnapshotMigration{1: func(json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(`[1]`), nil
			}}
		})
		_, err := db.PutSnapshot(ctx, "i1", "world", 1, Envelope(`{"hp":3}`))
		WantCode(t, err, apierr.EINVALIDENVELOPE)
		if _, err := db.Snapshot(ctx, "i1", "world"); apierr.Code(err) != apierr.ENOTFOUND {
			t.Fatalf("failed migration reached the cache: %v", err)
		}
	})
	t.Run("StoredOlderVersionMigratedOnOpen", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "mapyard.db")
		db := sqlite.NewDB(path)
		if err := db.Open(); err != nil {
			t.Fatal(err)
		}
		MustPut(t, db, "i1", "world", 4, `{"hp":3}`, true)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		refused := sqlite.NewDB(path)
		refused.SchemaVersion = 2
		if err := refused.Open(); apierr.Code(err) != apierr.ESCHEMAVERSION {
			refused.Close()
			t.Fatalf("open without migration: err=%v, want schema_version", err)
		}

		db = MustOpenDBAt(t, path, v2)
		s, err := db.Snapshot(ctx, "i1", "world")
		if err != nil {
			t.Fatal(err)
		}
		if s.Revision != 4 || s.Envelope.SchemaVersion != 2 || string(s.Envelope.Payload) != `{"health":3}` {
			t.Fatalf("snapshot=%+v payload=%s", s, s.Envelope.Payload)
		}
		if res, err := db.Checkpoint(ctx); err != nil || res.Rows != 1 {
			t.Fatalf("checkpoint=%+v, %v; want the migrated row rewritten", res, err)
		}
		raw := MustRawDB(t, path)
		if got := MustCount(t, raw, `SELECT COUNT(*) FROM instance_partitions WHERE schema_version = 2`); got != 1 {
			t.Fatalf("rows at version 2=%d, want 1", got)
		}
	})
}
