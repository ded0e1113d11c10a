package edge

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mapyard/mapyard/mapserver/kernel/ratelimit"
)

// newLimiter returns a per-address limiter of perMin requests a minute with burst,
// tracking at most clients addresses, or nil (no limit) when perMin is 0.
func newLimiter(perMin, burst, clients int) *ratelimit.Limiter {
	if perMin <= 0 {
		return nil
	}
	l := ratelimit.New(perMin, burst)
	if clients > 0 {
		l.MaxClients = clients
	}
	return l
}

// registerLimitMetrics exposes, per route, the requests a limit refused and the
// addresses it tracks.
func registerLimitMetrics(reg prometheus.Registerer, limits map[string]*ratelimit.Limiter) {
	for route, l := range limits {
		if l == nil {
			continue
		}
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mapyard_edge_rate_limited_total",
				Help: "requests the edge refused with 429 rate_limited", ConstLabels: prometheus.Labels{"route": route}},
				func() float64 { return float64(l.Refused()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mapyard_edge_rate_limit_clients",
				Help: "client addresses a rate limit of the edge tracks now", ConstLabels: prometheus.Labels{"route": route}},
				func() float64 { return float64(l.Len()) }))
	}
}
