package ws

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Defaults of Limits, sized from what the Go client sends while playing (measured with
// mapserver/client): a moving player that acknowledged every snapshot and pinged once a
// second sent 46 messages and 4.7 KB a second (30 input batches, 15 acks, 1 ping); an
// idle one 16 messages and 0.5 KB (fewer now that an idle client acks only snapshots
// that changed its view, and one in 8 of the others). The rates leave twice that or
// more, the bursts absorb a few seconds of that stream arriving at once after the
// network stalled.
const (
	// DefaultMsgRate is the messages a connection may send per second, sustained.
	DefaultMsgRate = 100
	// DefaultMsgBurst is the messages it may send at once above the rate.
	DefaultMsgBurst = 200
	// DefaultByteRate is the payload bytes a connection may send per second, sustained.
	DefaultByteRate = 16 << 10
	// DefaultByteBurst is the payload bytes it may send at once; at least one message of
	// the read limit.
	DefaultByteBurst = 64 << 10
)

// Refusals before a close: a client over its limits gets a rate_limited error for
// every refused message; refusals are forgiven at refusalRate per second, and one that
// finds more than refusalBurst unforgiven closes the connection with 1008. A client
// slightly over its limit for a moment is told so; one that floods, or stays over its
// limit for about ten seconds, is closed.
const (
	refusalRate  = 5
	refusalBurst = 50
)

// Reasons counted by Metrics.RateLimited.
const (
	ReasonMessages = "messages" // a message refused: over the message rate
	ReasonBytes    = "bytes"    // a message refused: over the byte rate
	ReasonClosed   = "closed"   // a connection closed for refusing to slow down
)

// Limits are the token buckets every connection's messages go through after its
// hello. A zero rate turns that bucket off.
type Limits struct {
	// MsgRate and MsgBurst bound messages per second.
	MsgRate  float64
	MsgBurst int
	// ByteRate and ByteBurst bound payload bytes per second.
	ByteRate  float64
	ByteBurst int
}

// DefaultLimits are the limits of a new Server.
func DefaultLimits() Limits {
	return Limits{MsgRate: DefaultMsgRate, MsgBurst: DefaultMsgBurst, ByteRate: DefaultByteRate, ByteBurst: DefaultByteBurst}
}

// limiter is one connection's buckets; only its reader uses it.
type limiter struct {
	msgs, bytes *rate.Limiter // nil: off
	refusals    *rate.Limiter
}

func newLimiter(l Limits) *limiter {
	lim := &limiter{refusals: rate.NewLimiter(refusalRate, refusalBurst)}
	if l.MsgRate > 0 {
		lim.msgs = rate.NewLimiter(rate.Limit(l.MsgRate), l.MsgBurst)
	}
	if l.ByteRate > 0 {
		lim.bytes = rate.NewLimiter(rate.Limit(l.ByteRate), l.ByteBurst)
	}
	return lim
}

// allow takes a message of size bytes from the buckets; it returns "" when the message
// passes, else the reason it is refused. A refused message takes no bytes.
func (l *limiter) allow(now time.Time, size int) string {
	if l.msgs != nil && !l.msgs.AllowN(now, 1) {
		return ReasonMessages
	}
	if l.bytes != nil && !l.bytes.AllowN(now, size) {
		return ReasonBytes
	}
	return ""
}

// strike records a refusal and reports whether the connection has had too many.
func (l *limiter) strike(now time.Time) bool { return !l.refusals.AllowN(now, 1) }

// refusedMessage is the text of a rate_limited error.
func refusedMessage(reason string, l Limits) string {
	if reason == ReasonBytes {
		return "over " + strconv.FormatFloat(l.ByteRate, 'f', -1, 64) + " bytes per second; message not processed"
	}
	return "over " + strconv.FormatFloat(l.MsgRate, 'f', -1, 64) + " messages per second; message not processed"
}

// Metrics are the transport's Prometheus metrics, on a registry the caller owns.
type Metrics struct {
	// RateLimited counts refused messages by reason (messages, bytes) and connections
	// closed for refusing to slow down (closed).
	RateLimited *prometheus.CounterVec
	// Links is the number of open links from the edge.
	Links prometheus.Gauge
}

// NewMetrics creates the transport's metrics and registers them with reg; a nil reg
// keeps them unregistered.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		RateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mapyard_map_rate_limited_total",
			Help: "Client messages refused over the per-connection limits, by reason (messages, bytes), and connections closed with 1008 for going on (closed).",
		}, []string{"reason"}),
		Links: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mapyard_map_links",
			Help: "Open links from the edge, each carrying many players' connections as streams.",
		}),
	}
	for _, r := range []string{ReasonMessages, ReasonBytes, ReasonClosed} {
		m.RateLimited.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.RateLimited, m.Links)
	}
	return m
}
