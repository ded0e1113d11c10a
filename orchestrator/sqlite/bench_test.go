package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/latency"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator/critical"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
)

// BenchmarkCommitCritical measures durable critical-event throughput and ack latency at
// 1, 16 and 200 concurrent submitters, with group commit and with one FULL commit per
// event (MaxCriticalBatch=1) as the baseline. Each event is a pickup decided by the item
// rules inside the transaction, so it reads and writes an inventory row besides the
// event and its audit row.
func BenchmarkCommitCritical(b *testing.B) {
	for _, mode := range []struct {
		name  string
		batch int
	}{{"group", sqlite.DefaultMaxCriticalBatch}, {"single", 1}} {
		for _, submitters := range []int{1, 16, 200} {
			b.Run(fmt.Sprintf("%s/submitters=%d", mode.name, submitters), func(b *testing.B) {
				db := MustOpenDB(b, func(db *sqlite.DB) { db.MaxCriticalBatch = mode.batch })
				benchCommitCritical(b, db, submitters)
			})
		}
	}
}

func benchCommitCritical(b *testing.B, db *sqlite.DB, submitters int) {
	ctx := context.Background()
	MustCharacter(b, db, "picker")
	seed := make([]items.Item, b.N)
	for i := range seed {
		seed[i] = groundItem(fmt.Sprintf("it-%d", i), "coin", 1)
	}
	MustSeed(b, db, seed...)
	cat := items.DefaultCatalog()
	lat := latency.NewRecorder(b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for s := 0; s < submitters; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				ev := ItemEvent(fmt.Sprintf("ev-%d", i), items.KindPickup, int64(i),
					mv(fmt.Sprintf("it-%d", i), "coin", 1, ground, items.Place{CharacterID: "picker"}))
				t0 := time.Now()
				c, _, err := critical.Prepare(cat, ev)
				if err == nil {
					_, err = db.CommitCritical(ctx, c)
				}
				if err != nil {
					b.Error(err)
					return
				}
				lat.Add(time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	lat.Report(b)
	if st := db.Stats(); st.CriticalCommits > 0 {
		b.ReportMetric(float64(st.CriticalEvents)/float64(st.CriticalCommits), "events/commit")
	}
}

// BenchmarkPutSnapshot measures in-memory snapshot ingest (validation and hash included)
// of 512-byte payloads over 1,000 partitions.
func BenchmarkPutSnapshot(b *testing.B) {
	db := MustOpenDB(b, func(db *sqlite.DB) { db.CheckpointInterval = -1 })
	ctx := context.Background()
	payload := json.RawMessage(`{"blob":"` + strings.Repeat("x", 500) + `"}`)
	env := record.NewSnapshotEnvelope("sim-1", 1, 0, payload)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := db.PutSnapshot(ctx, "i1", fmt.Sprintf("p%d", i%1000), int64(i/1000+1), env); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkCheckpoint measures one checkpoint flushing 10,000 dirty 512-byte partitions
// in a single batched transaction; rows/s is the batched snapshot write rate.
func BenchmarkCheckpoint(b *testing.B) {
	const rows = 10000
	db := MustOpenDB(b, func(db *sqlite.DB) { db.CheckpointInterval = -1 })
	ctx := context.Background()
	payload := json.RawMessage(`{"blob":"` + strings.Repeat("x", 500) + `"}`)
	env := record.NewSnapshotEnvelope("sim-1", 1, 0, payload)
	var flushed time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for p := 0; p < rows; p++ {
			if _, err := db.PutSnapshot(ctx, fmt.Sprintf("i%d", p%20), fmt.Sprintf("p%d", p), int64(i+1), env); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		t0 := time.Now()
		res, err := db.Checkpoint(ctx)
		if err != nil {
			b.Fatal(err)
		} else if res.Rows != rows {
			b.Fatalf("rows=%d, want %d", res.Rows, rows)
		}
		flushed += time.Since(t0)
	}
	b.ReportMetric(float64(rows*b.N)/flushed.Seconds(), "rows/s")
	b.ReportMetric(float64(flushed.Microseconds())/1000/float64(b.N), "ms/checkpoint")
}
