package edge

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the edge's Prometheus series, served on its loopback metrics listener.
// Every method is safe on a nil *Metrics, so the proxy runs without them in tests.
type Metrics struct {
	open       prometheus.Gauge
	proxied    prometheus.Counter
	ended      prometheus.Counter
	hoClosed   prometheus.Counter
	refusals   *prometheus.CounterVec
	bytesTotal *prometheus.CounterVec
	up, down   prometheus.Counter
	connBytes  *prometheus.HistogramVec
	connTime   prometheus.Histogram
	orchUp     prometheus.Gauge
	routes     prometheus.Gauge
	links      prometheus.Gauge
	linkDrops  prometheus.Counter
	moves      *prometheus.CounterVec
	moveTime   prometheus.Histogram
}

// NewMetrics registers the edge's series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mapyard_edge_ws_connections",
			Help: "Player WebSockets being forwarded to maps."}),
		proxied: prometheus.NewCounter(prometheus.CounterOpts{Name: "mapyard_edge_ws_connections_total",
			Help: "Player WebSockets forwarded to maps since start."}),
		ended: prometheus.NewCounter(prometheus.CounterOpts{Name: "mapyard_edge_ws_ended_total",
			Help: "Player WebSockets forwarded to maps that ended since start, whoever ended them (the player, its map, the edge)."}),
		hoClosed: prometheus.NewCounter(prometheus.CounterOpts{Name: "mapyard_edge_ws_handover_closed_total",
			Help: "Player WebSockets the edge closed itself after handing its port over to the next edge (their players resume through it)."}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mapyard_edge_ws_refused_total",
			Help: "Player WebSocket upgrades refused before the upgrade, by reason."}, []string{"reason"}),
		bytesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mapyard_edge_ws_bytes_total",
			Help: "Bytes copied between players and maps, by direction."}, []string{"direction"}),
		connBytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mapyard_edge_ws_connection_bytes",
			Help:    "Bytes one player connection carried over its life, by direction.",
			Buckets: prometheus.ExponentialBuckets(1<<10, 4, 10)}, []string{"direction"}),
		connTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mapyard_edge_ws_connection_seconds",
			Help: "Life of one player connection.", Buckets: prometheus.ExponentialBuckets(1, 4, 9)}),
		orchUp: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mapyard_edge_orchestrator_up",
			Help: "1 while the edge's route watch reaches the orchestrator, 0 while it serves its last table."}),
		routes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mapyard_edge_routes",
			Help: "Map instances in the edge's route table."}),
		links: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mapyard_edge_map_links",
			Help: "Links open to maps, each carrying every player the edge forwards to that map."}),
		linkDrops: prometheus.NewCounter(prometheus.CounterOpts{Name: "mapyard_edge_slow_players_dropped_total",
			Help: "Players on a link dropped because they did not read what their map sent them (256 KiB unread, or nothing taken for the write timeout)."}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mapyard_edge_ws_moves_total",
			Help: "Player WebSockets a map moved to the next container of its instance (a live upgrade), by result: moved (the socket stayed open) or failed (closed with map gone; the player joins again)."}, []string{"result"}),
		moveTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mapyard_edge_ws_move_seconds",
			Help:    "From a map's move record to the next container's answer, for moved player WebSockets.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
	}
	reg.MustRegister(m.open, m.proxied, m.ended, m.hoClosed, m.refusals, m.bytesTotal, m.connBytes, m.connTime, m.orchUp, m.routes,
		m.links, m.linkDrops, m.moves, m.moveTime)
	m.up, m.down = m.bytesTotal.WithLabelValues(dirUp), m.bytesTotal.WithLabelValues(dirDown)
	return m
}

func (m *Metrics) bytes(dir string) prometheus.Counter {
	switch {
	case m == nil:
		return nil
	case dir == dirUp:
		return m.up
	default:
		return m.down
	}
}

func (m *Metrics) opened() {
	if m != nil {
		m.open.Inc()
		m.proxied.Inc()
	}
}

func (m *Metrics) closed(up, down int64, life time.Duration) {
	if m != nil {
		m.open.Dec()
		m.ended.Inc()
		m.connBytes.WithLabelValues(dirUp).Observe(float64(up))
		m.connBytes.WithLabelValues(dirDown).Observe(float64(down))
		m.connTime.Observe(life.Seconds())
	}
}

// handoverClosed counts a player connection closed for the next edge.
func (m *Metrics) handoverClosed() {
	if m != nil {
		m.hoClosed.Inc()
	}
}

func (m *Metrics) refused(reason string) {
	if m != nil {
		m.refusals.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) table(online bool, routes int) {
	if m != nil {
		v := 0.0
		if online {
			v = 1
		}
		m.orchUp.Set(v)
		m.routes.Set(float64(routes))
	}
}

// link counts a link opened (+1) or ended (-1).
func (m *Metrics) link(delta int) {
	if m != nil {
		m.links.Add(float64(delta))
	}
}

// slowDropped counts a player dropped for not reading.
func (m *Metrics) slowDropped() {
	if m != nil {
		m.linkDrops.Inc()
	}
}

// moved counts one move of a player's socket to the next container: made (after d) or
// failed.
func (m *Metrics) moved(ok bool, d time.Duration) {
	switch {
	case m == nil:
	case ok:
		m.moves.WithLabelValues("moved").Inc()
		m.moveTime.Observe(d.Seconds())
	default:
		m.moves.WithLabelValues("failed").Inc()
	}
}
