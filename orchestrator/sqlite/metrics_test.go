package sqlite_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// MustOpenMeteredDB opens a database whose metrics and state collector are registered
// on a registry of the test's own.
func MustOpenMeteredDB(tb testing.TB) (*sqlite.DB, *prometheus.Registry) {
	tb.Helper()
	reg := prometheus.NewRegistry()
	db := MustOpenDB(tb, func(db *sqlite.DB) {
		db.Metrics = sqlite.NewMetrics(reg)
		db.CheckpointInterval = -1
	})
	reg.MustRegister(db.Collector())
	return db, reg
}

func TestMetrics_SnapshotIngest(t *testing.T) {
	ctx := context.Background()
	db, reg := MustOpenMeteredDB(t)
	MustPut(t, db, "i1", "world", 1, `{"n":1}`, true)
	MustPut(t, db, "i1", "world", 2, `{"n":22}`, true)
	MustPut(t, db, "i1", "world", 2, `{"n":2}`, false)
	MustPut(t, db, "i1", "chest", 1, `{}`, true)
	if _, err := db.PutSnapshot(ctx, "i1", "world", 0, Envelope(`{}`)); apierr.Code(err) != apierr.EBADREQUEST {
		t.Fatalf("revision 0: %v", err)
	}

	for outcome, want := range map[string]float64{"accepted": 3, "stale": 1, apierr.EBADREQUEST: 1} {
		if got := testutil.Metric(t, reg, "mapyard_snapshot_partitions_total", "outcome", outcome); got != want {
			t.Errorf("partitions %s=%v, want %v", outcome, got, want)
		}
	}
	if got, want := testutil.Metric(t, reg, "mapyard_snapshot_partitions_cached"), 2.0; got != want {
		t.Errorf("cached=%v, want %v", got, want)
	}
	if got, want := testutil.Metric(t, reg, "mapyard_snapshot_partitions_dirty"), 2.0; got != want {
		t.Errorf("dirty=%v, want %v", got, want)
	}

	res, err := db.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.Metric(t, reg, "mapyard_snapshot_partitions_dirty"); got != 0 {
		t.Errorf("dirty after checkpoint=%v, want 0", got)
	}
	if got, want := testutil.Metric(t, reg, "mapyard_checkpoint_rows_total"), float64(res.Rows); got != want || want != 2 {
		t.Errorf("checkpoint rows=%v, want %v (2)", got, want)
	}
	if got := testutil.Metric(t, reg, "mapyard_checkpoint_last_success_timestamp_seconds"); got != float64(res.At.UnixNano())/1e9 {
		t.Errorf("last checkpoint=%v, want %v", got, res.At)
	}
}

func TestMetrics_Commits(t *testing.T) {
	db, reg := MustOpenMeteredDB(t)
	MustCharacter(t, db, "alice")
	MustCharacter(t, db, "bob")
	MustCommit(t, db, Event("e1", "quest_flag", `{"a":1}`))

	if got, want := testutil.Metric(t, reg, "mapyard_characters"), 2.0; got != want {
		t.Errorf("characters=%v, want %v", got, want)
	}
	commits := func(kind string) float64 {
		return testutil.Metric(t, reg, "mapyard_db_commit_duration_seconds", "kind", kind)
	}
	waits := func(kind string) float64 {
		return testutil.Metric(t, reg, "mapyard_db_write_duration_seconds", "kind", kind)
	}
	if commits("critical") != 1 || commits("write") < 2 {
		t.Errorf("commits: critical %v, write %v; want 1 and at least 2", commits("critical"), commits("write"))
	}
	if waits("critical") != 1 || waits("write") != commits("write") {
		t.Errorf("waits: critical %v, write %v; want one per commit", waits("critical"), waits("write"))
	}
	if got := testutil.Metric(t, reg, "mapyard_db_critical_group_events"); got != 1 {
		t.Errorf("group commits observed: %v, want 1", got)
	}
}

// BenchmarkCommitCriticalMetered is BenchmarkCommitCritical's group commit with the
// store's metrics recorded: compare the two for what the metrics cost.
func BenchmarkCommitCriticalMetered(b *testing.B) {
	for _, submitters := range []int{1, 200} {
		b.Run(fmt.Sprintf("group/submitters=%d", submitters), func(b *testing.B) {
			db := MustOpenDB(b, func(db *sqlite.DB) { db.Metrics = sqlite.NewMetrics(prometheus.NewRegistry()) })
			benchCommitCritical(b, db, submitters)
		})
	}
}

// BenchmarkPutSnapshotMetered is BenchmarkPutSnapshot with the store's metrics recorded.
func BenchmarkPutSnapshotMetered(b *testing.B) {
	db := MustOpenDB(b, func(db *sqlite.DB) {
		db.CheckpointInterval = -1
		db.Metrics = sqlite.NewMetrics(prometheus.NewRegistry())
	})
	ctx := context.Background()
	env := Envelope(`{"blob":"` + strings.Repeat("x", 500) + `"}`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := db.PutSnapshot(ctx, "i1", fmt.Sprintf("p%d", i%1000), int64(i/1000+1), env); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
