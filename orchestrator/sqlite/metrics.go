package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// Transaction kinds, the "kind" label of the writer's series: a group commit of
// critical events, or any other write transaction (leases, nonces, transfers,
// characters, checkpoint chunks).
const (
	kindCritical = "critical"
	kindWrite    = "write"
)

// Outcomes of a pushed snapshot partition besides an error code: "accepted" (newer
// than what the store holds) or "stale" (a retry or a reordered older push).
const (
	ingestAccepted = "accepted"
	ingestStale    = "stale"
)

// Metrics are the store's Prometheus series: how long the single writer takes to commit,
// how snapshot partitions are ingested and checkpointed. Set DB.Metrics before Open;
// a nil *Metrics records nothing, so tests and tools run without them.
type Metrics struct {
	commit     *prometheus.HistogramVec
	wait       *prometheus.HistogramVec
	failures   *prometheus.CounterVec
	group      prometheus.Histogram
	ingest     *prometheus.CounterVec
	ingestSize prometheus.Counter
	ckptRows   prometheus.Counter
	ckptTime   prometheus.Histogram
	ckptLast   prometheus.Gauge
	full       prometheus.Counter
}

// dbBuckets span a page-cache commit (tens of microseconds) to a slow disk's fsync
// under load (a second and more).
var dbBuckets = prometheus.ExponentialBuckets(50e-6, 2.5, 14)

// NewMetrics creates the store's series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		commit: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mapyard_db_commit_duration_seconds",
			Help:    "Time the single database writer spends on one committed transaction, begin to durable commit, by kind (critical: a group commit of critical events; write: any other).",
			Buckets: dbBuckets}, []string{"kind"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mapyard_db_write_duration_seconds",
			Help:    "Time a caller waits for a database write, queueing for the single writer included, by kind.",
			Buckets: dbBuckets}, []string{"kind"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mapyard_db_transaction_failures_total",
			Help: "Write transactions rolled back (a write refused by its own checks included) or failed to commit, by kind."}, []string{"kind"}),
		group: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mapyard_db_critical_group_events",
			Help: "Critical events carried by one group commit (one fsync).", Buckets: prometheus.ExponentialBuckets(1, 2, 11)}),
		ingest: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mapyard_snapshot_partitions_total",
			Help: "Snapshot partitions pushed by maps, by outcome: accepted, stale (already held as new or newer) or the error code of a refusal."},
			[]string{"outcome"}),
		ingestSize: prometheus.NewCounter(prometheus.CounterOpts{Name: "mapyard_snapshot_payload_bytes_total",
			Help: "Payload bytes of accepted snapshot partitions."}),
		ckptRows: prometheus.NewCounter(prometheus.CounterOpts{Name: "mapyard_checkpoint_rows_total",
			Help: "Snapshot partitions written to the database by checkpoints."}),
		ckptTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mapyard_checkpoint_duration_seconds",
			Help: "Time one checkpoint with something to write took.", Buckets: prometheus.ExponentialBuckets(1e-3, 3, 10)}),
		ckptLast: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mapyard_checkpoint_last_success_timestamp_seconds",
			Help: "Unix time of the last checkpoint that completed (0 before the first since start)."}),
		full: prometheus.NewCounter(prometheus.CounterOpts{Name: "mapyard_db_storage_full_total",
			Help: "Writes refused with storage_full: the database's disk was full (SQLite's SQLITE_FULL)."}),
	}
	reg.MustRegister(m.commit, m.wait, m.failures, m.group, m.ingest, m.ingestSize, m.ckptRows, m.ckptTime, m.ckptLast, m.full)
	return m
}

// committed records one transaction the writer committed.
func (m *Metrics) committed(kind string, took time.Duration) {
	if m != nil {
		m.commit.WithLabelValues(kind).Observe(took.Seconds())
	}
}

// failed records one transaction that did not commit.
func (m *Metrics) failed(kind string) {
	if m != nil {
		m.failures.WithLabelValues(kind).Inc()
	}
}

// waited records how long a caller has waited, since start, for the writer's answer.
func (m *Metrics) waited(kind string, start time.Time) {
	if m != nil {
		m.wait.WithLabelValues(kind).Observe(time.Since(start).Seconds())
	}
}

// storageFull records one write refused for want of space.
func (m *Metrics) storageFull() {
	if m != nil {
		m.full.Inc()
	}
}

// grouped records the size of one committed group.
func (m *Metrics) grouped(n int) {
	if m != nil {
		m.group.Observe(float64(n))
	}
}

// pushed records the outcome of one pushed partition of size payload bytes.
func (m *Metrics) pushed(accepted bool, size int, err error) {
	if m == nil {
		return
	}
	switch {
	case err != nil:
		m.ingest.WithLabelValues(apierr.Code(err)).Inc()
	case accepted:
		m.ingest.WithLabelValues(ingestAccepted).Inc()
		m.ingestSize.Add(float64(size))
	default:
		m.ingest.WithLabelValues(ingestStale).Inc()
	}
}

// checkpointed records one checkpoint that wrote rows partitions.
func (m *Metrics) checkpointed(rows int, took time.Duration, at time.Time) {
	if m != nil {
		m.ckptRows.Add(float64(rows))
		m.ckptTime.Observe(took.Seconds())
		m.ckptLast.Set(float64(at.UnixNano()) / 1e9)
	}
}

// Collector returns a collector of what the database holds now, read at each scrape:
// saved characters and the snapshot partitions cached in memory, in total and waiting
// for the next checkpoint. Register it once the DB is open.
func (db *DB) Collector() prometheus.Collector { return stateCollector{db} }

// stateCollector reads the store's state when Prometheus scrapes.
type stateCollector struct{ db *DB }

var (
	descCharacters = prometheus.NewDesc("mapyard_characters",
		"Characters saved in the database (disposable guest characters are mapyard_guest_characters).", nil, nil)
	descCached = prometheus.NewDesc("mapyard_snapshot_partitions_cached",
		"Snapshot partitions held in memory, the newest of each partition.", nil, nil)
	descDirty = prometheus.NewDesc("mapyard_snapshot_partitions_dirty",
		"Snapshot partitions accepted since the last checkpoint, which the next one writes.", nil, nil)
)

// countTimeout bounds the count of characters a scrape runs.
const countTimeout = 2 * time.Second

// Describe implements prometheus.Collector.
func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCharacters
	ch <- descCached
	ch <- descDirty
}

// Collect implements prometheus.Collector. A failed count of characters leaves that
// series out of the scrape rather than reporting a wrong number.
func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), countTimeout)
	defer cancel()
	if n, err := c.db.CharacterCount(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(descCharacters, prometheus.GaugeValue, float64(n))
	}
	cached, dirty := c.db.cache.counts()
	ch <- prometheus.MustNewConstMetric(descCached, prometheus.GaugeValue, float64(cached))
	ch <- prometheus.MustNewConstMetric(descDirty, prometheus.GaugeValue, float64(dirty))
}

// CharacterCount returns how many characters the database holds.
func (db *DB) CharacterCount(ctx context.Context) (n int64, err error) {
	if err = db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM characters`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count characters: %w", err)
	}
	return n, nil
}

// counts returns how many partitions the cache holds and how many of them are dirty.
func (c *snapshotCache) counts() (cached, dirty int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.dirty {
			dirty++
		}
	}
	return len(c.entries), dirty
}
