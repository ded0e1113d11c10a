package supervise

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mapyard/mapyard/orchestrator"
)

// Metrics are the supervisor's Prometheus metrics. They live on a registry the caller
// owns (never the global one), so tests and several supervisors never collide.
type Metrics struct {
	Transitions      *prometheus.CounterVec
	Instances        *prometheus.GaugeVec
	Restarts         *prometheus.CounterVec
	Exits            *prometheus.CounterVec
	Quarantines      prometheus.Counter
	ProbeFailures    prometheus.Counter
	EventsReconnects prometheus.Counter
	Adopted          prometheus.Counter
	OrphansRemoved   prometheus.Counter
	Handouts         prometheus.Counter
	PoolReady        prometheus.Gauge
	// ImageInstances counts map instances by image and state: which game's maps run,
	// and which cannot start for want of their image.
	ImageInstances *prometheus.GaugeVec
	// PoolImageReady is PoolReady by image, since a spare is handed only to a map of
	// its own image.
	PoolImageReady *prometheus.GaugeVec
	// RefusedTransitions counts state changes the lifecycle table refused, by event:
	// each is a defect (a rule asked for a change the table does not have), so any
	// is worth an alert.
	RefusedTransitions *prometheus.CounterVec
	// Upgrades counts live upgrades by how they ended: done or failed.
	Upgrades *prometheus.CounterVec
}

// NewMetrics creates the supervisor's metrics and registers them with reg; a nil reg
// keeps them unregistered (counted but not served).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mapyard_map_state_transitions_total", Help: "Map instance state transitions, by from and to state.",
		}, []string{"from", "to"}),
		Instances: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mapyard_map_instances", Help: "Map instances by current state.",
		}, []string{"state"}),
		Restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mapyard_map_restarts_total", Help: "Restarts after a crash or failed health, by instance (operator restarts and clean stops are not counted).",
		}, []string{"instance"}),
		Exits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mapyard_map_exits_total", Help: "Map container exits, by kind: clean, crash, oom, or lost (its Swarm node was lost or drained).",
		}, []string{"kind"}),
		Quarantines: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mapyard_map_quarantines_total", Help: "Times a map instance was quarantined for failing too often.",
		}),
		ProbeFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mapyard_map_probe_failures_total", Help: "Failed HTTP probes of map /health.",
		}),
		EventsReconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mapyard_docker_events_reconnects_total", Help: "Times the runtime's container events stream (Docker's) was lost and reconnected.",
		}),
		Adopted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mapyard_map_adopted_total", Help: "Running map containers adopted at orchestrator start.",
		}),
		OrphansRemoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mapyard_map_orphans_removed_total", Help: "Containers of unknown instances removed.",
		}),
		Handouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mapyard_warm_pool_handouts_total", Help: "Instances started by handing out a warm pool container.",
		}),
		PoolReady: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mapyard_warm_pool_ready", Help: "Warm pool containers registered and ready for handout.",
		}),
		ImageInstances: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mapyard_map_instances_by_image", Help: "Map instances by container image and current state.",
		}, []string{"image", "state"}),
		PoolImageReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mapyard_warm_pool_ready_by_image", Help: "Warm pool containers registered and ready for handout, by image.",
		}, []string{"image"}),
		RefusedTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mapyard_map_refused_transitions_total", Help: "Map instance state changes the lifecycle table refused, by event (each a defect).",
		}, []string{"event"}),
		Upgrades: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mapyard_map_upgrades_total", Help: "Live map upgrades, by result: done or failed.",
		}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.Transitions, m.Instances, m.Restarts, m.Exits, m.Quarantines, m.ProbeFailures,
			m.EventsReconnects, m.Adopted, m.OrphansRemoved, m.Handouts, m.PoolReady, m.ImageInstances, m.PoolImageReady, m.RefusedTransitions, m.Upgrades)
	}
	return m
}

// transition counts one state change of an instance of image and moves the
// per-state gauges.
func (m *Metrics) transition(image string, from, to orchestrator.InstanceState) {
	m.Transitions.WithLabelValues(string(from), string(to)).Inc()
	m.setState(image, from, to)
}

// setState moves one instance of image between per-state gauges; "" means none.
func (m *Metrics) setState(image string, from, to orchestrator.InstanceState) {
	if from != "" {
		m.Instances.WithLabelValues(string(from)).Dec()
		m.ImageInstances.WithLabelValues(image, string(from)).Dec()
	}
	if to != "" {
		m.Instances.WithLabelValues(string(to)).Inc()
		m.ImageInstances.WithLabelValues(image, string(to)).Inc()
	}
}

// setImage moves one instance in state from image from to image to.
func (m *Metrics) setImage(state orchestrator.InstanceState, from, to string) {
	m.ImageInstances.WithLabelValues(from, string(state)).Dec()
	m.ImageInstances.WithLabelValues(to, string(state)).Inc()
}

// upgraded counts a live upgrade that ended with phase (done or failed).
func (m *Metrics) upgraded(phase string) { m.Upgrades.WithLabelValues(phase).Inc() }
