package tickloop

import "github.com/prometheus/client_golang/prometheus"

// Command outcomes counted by Metrics.Commands.
const (
	OutcomeApplied   = "applied"   // decoded and handed to the simulation
	OutcomeDuplicate = "duplicate" // seq not above the last accepted one: ignored
	OutcomeMalformed = "malformed" // payload did not decode: error sent
	OutcomeRejected  = "rejected"  // the simulation refused it: error sent
	OutcomeIgnored   = "ignored"   // the character is leaving through a portal
)

// Metrics are the tick runtime's Prometheus metrics, on a registry the caller owns
// (never the global one), so tests and several loops never collide.
type Metrics struct {
	TickDuration  prometheus.Histogram
	TickInterval  prometheus.Histogram
	Overruns      prometheus.Counter
	SkippedTicks  prometheus.Counter
	Ticks         prometheus.Counter
	Players       prometheus.Gauge
	Connections   prometheus.Gauge
	Entities      prometheus.Gauge
	SnapshotBytes *prometheus.CounterVec
	Snapshots     *prometheus.CounterVec
	Dropped       prometheus.Counter
	Commands      *prometheus.CounterVec
	InputsDropped prometheus.Counter

	// outcomes are Commands by outcome, resolved once: a labelled lookup per command
	// cost the tick loop as much as deciding it.
	outcomes [len(outcomeNames)]prometheus.Counter
}

// outcome is a command outcome as the loop counts it: an index into the counters
// resolved when the metrics are made.
type outcome int

const (
	cmdApplied outcome = iota
	cmdDuplicate
	cmdMalformed
	cmdRejected
	cmdIgnored
)

// outcomeNames are the Commands labels of the outcomes.
var outcomeNames = [...]string{
	cmdApplied: OutcomeApplied, cmdDuplicate: OutcomeDuplicate, cmdMalformed: OutcomeMalformed,
	cmdRejected: OutcomeRejected, cmdIgnored: OutcomeIgnored,
}

// command is the Commands counter of o.
func (m *Metrics) command(o outcome) prometheus.Counter { return m.outcomes[o] }

// NewMetrics creates the loop's metrics and registers them with reg; a nil reg keeps
// them unregistered (counted but not served).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	// Fine between 2 and 33 ms, where a busy map's wake-ups fall, with bounds at 8 and
	// 15 ms (the tick + snapshot targets of docs/benchmarks.md): a p99 read from the
	// buckets is then off by a millisecond or two at most, not by the width of an
	// 8-16 ms bucket.
	ms := []float64{.0001, .00025, .0005, .001, .002, .003, .004, .005, .006, .008, .010, .012, .015, .020, .025, .033, .050, .066, .1, .25}
	m := &Metrics{
		TickDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "mapyard_map_tick_duration_seconds", Help: "Time one wake-up of the tick loop works: inputs, simulation steps and snapshot building.",
			Buckets: ms,
		}),
		TickInterval: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "mapyard_map_tick_interval_seconds", Help: "Time between two wake-ups of the tick loop (jitter around the tick period).",
			Buckets: []float64{.005, .01, .02, .025, .03, .033, .035, .04, .05, .066, .1, .25, .5},
		}),
		Overruns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mapyard_map_tick_overruns_total", Help: "Wake-ups that found the loop a full tick or more behind and caught up.",
		}),
		SkippedTicks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mapyard_map_ticks_skipped_total", Help: "Ticks given up because catching up would have taken more than the catch-up bound.",
		}),
		Ticks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mapyard_map_ticks_total", Help: "Simulation steps run.",
		}),
		Players: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mapyard_map_players", Help: "Characters in the game state, connected or awaiting resume.",
		}),
		Connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mapyard_map_connections", Help: "Characters with a connection attached.",
		}),
		Entities: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mapyard_map_entities", Help: "Entities in the simulation (players and NPCs).",
		}),
		SnapshotBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mapyard_map_snapshot_bytes_total", Help: "Bytes of snapshot frames queued to clients, by mode (full or delta).",
		}, []string{"mode"}),
		Snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mapyard_map_snapshots_total", Help: "Snapshot frames queued to clients, by mode (full or delta).",
		}, []string{"mode"}),
		Dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mapyard_map_dropped_clients_total", Help: "Connections dropped because their send queue was full.",
		}),
		Commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mapyard_map_commands_total", Help: "Client commands by outcome (applied, duplicate, malformed, rejected, ignored).",
		}, []string{"outcome"}),
		InputsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mapyard_map_inputs_dropped_total", Help: "Movement inputs never walked: sent faster than the tick past the jitter buffer, or shed as a standing delay.",
		}),
	}
	for i, name := range outcomeNames {
		m.outcomes[i] = m.Commands.WithLabelValues(name)
	}
	if reg != nil {
		reg.MustRegister(m.TickDuration, m.TickInterval, m.Overruns, m.SkippedTicks, m.Ticks, m.Players, m.Connections,
			m.Entities, m.SnapshotBytes, m.Snapshots, m.Dropped, m.Commands, m.InputsDropped)
	}
	return m
}
