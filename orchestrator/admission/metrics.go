package admission

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// Outcome label values besides error codes. An error's outcome is its code
// (apierr.Code: "ticket_used", "map_quarantined", ...), a small fixed set, so no label
// ever carries an authKey, a character name or an id.
const (
	outcomeOK = "ok"
	// Final outcomes of a transfer (mapyard_transfers_total).
	outcomeCompleted         = "completed"
	outcomeDestinationFailed = "destination_failed"
	outcomeExpired           = "expired"
	outcomeSuperseded        = "superseded"
	outcomeFailed            = "failed"
)

// Identity kinds of a join (the "identity" label): a saved character reached with an
// authKey, or a disposable guest.
const (
	identityKey   = "key"
	identityGuest = "guest"
)

// Metrics are the admission service's Prometheus series: joins, redeems and transfers by
// outcome and latency. Set Service.Metrics before use; every method is safe on a nil
// *Metrics, so tests run without them.
type Metrics struct {
	joins        *prometheus.CounterVec
	joinTime     prometheus.Histogram
	redeems      *prometheus.CounterVec
	redeemTime   prometheus.Histogram
	requests     *prometheus.CounterVec
	requestTime  prometheus.Histogram
	transfers    *prometheus.CounterVec
	transferTime prometheus.Histogram
}

// rpcBuckets span a join answered from memory (well under a millisecond) to one that
// waits for a map to start (seconds).
var rpcBuckets = prometheus.ExponentialBuckets(250e-6, 2.5, 14)

// NewMetrics creates the service's series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		joins: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mapyard_joins_total",
			Help: "Join requests, by identity (key or guest) and outcome (ok or the error code)."}, []string{"identity", "outcome"}),
		joinTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mapyard_join_duration_seconds",
			Help: "Time to answer a join request, a map start it waits for included.", Buckets: rpcBuckets}),
		redeems: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mapyard_redeems_total",
			Help: "Join tickets and transfer tokens presented by maps, by kind (join, transfer, or unknown when the token does not verify) and outcome (ok or the error code)."},
			[]string{"kind", "outcome"}),
		redeemTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mapyard_redeem_duration_seconds",
			Help: "Time to redeem a ticket or token: verification, the durable nonce and the lease.", Buckets: rpcBuckets}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mapyard_transfer_requests_total",
			Help: "Transfer requests from source maps, by outcome (ok: a token was issued, or the error code)."}, []string{"outcome"}),
		requestTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mapyard_transfer_request_duration_seconds",
			Help: "Time from a source map's transfer request to its token: destination start, final state saved, lease released.", Buckets: rpcBuckets}),
		transfers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mapyard_transfers_total",
			Help: "Transfers that ended, by outcome: completed, destination_failed, expired (token not redeemed in time), superseded (the player joined instead) or failed (the request could not finish)."},
			[]string{"outcome"}),
		transferTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mapyard_transfer_duration_seconds",
			Help: "Time from a transfer's token to the destination's report of success: the handoff a player waits through.", Buckets: rpcBuckets}),
	}
	reg.MustRegister(m.joins, m.joinTime, m.redeems, m.redeemTime, m.requests, m.requestTime, m.transfers, m.transferTime)
	return m
}

// outcome is the label of a call that returned err.
func outcome(err error) string {
	if err == nil {
		return outcomeOK
	}
	return apierr.Code(err)
}

// joined records one join that started at start.
func (m *Metrics) joined(guest bool, start time.Time, err error) {
	if m == nil {
		return
	}
	identity := identityKey
	if guest {
		identity = identityGuest
	}
	m.joins.WithLabelValues(identity, outcome(err)).Inc()
	m.joinTime.Observe(time.Since(start).Seconds())
}

// redeemed records one redeem of a token of kind ("" if it did not verify).
func (m *Metrics) redeemed(kind string, start time.Time, err error) {
	if m == nil {
		return
	}
	if kind == "" {
		kind = "unknown"
	}
	m.redeems.WithLabelValues(kind, outcome(err)).Inc()
	m.redeemTime.Observe(time.Since(start).Seconds())
}

// requested records one transfer request.
func (m *Metrics) requested(start time.Time, err error) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(outcome(err)).Inc()
	m.requestTime.Observe(time.Since(start).Seconds())
}

// ended records a transfer that reached its final state, end; a completed one
// also records how long its handoff took since its token was issued.
func (m *Metrics) ended(end string, issuedAt, now time.Time) {
	if m == nil {
		return
	}
	m.transfers.WithLabelValues(end).Inc()
	if end == outcomeCompleted && !issuedAt.IsZero() {
		m.transferTime.Observe(now.Sub(issuedAt).Seconds())
	}
}
