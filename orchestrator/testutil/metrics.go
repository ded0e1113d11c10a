package testutil

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metric returns the value of the series name in g whose labels include every
// name=value pair of labels (given as "name", "value", ...): a counter's or gauge's
// value, or a histogram's sample count. A series that does not exist yet is 0, as
// Prometheus reads a counter never incremented; more than one match fails the test.
func Metric(tb testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	tb.Helper()
	if len(labels)%2 != 0 {
		tb.Fatalf("metric %s: labels must be name, value pairs: %q", name, labels)
	}
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatalf("gather: %v", err)
	}
	var found []*dto.Metric
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if hasLabels(m, labels) {
				found = append(found, m)
			}
		}
	}
	switch {
	case len(found) == 0:
		return 0
	case len(found) > 1:
		tb.Fatalf("metric %s%q: %d series match", name, labels, len(found))
	}
	m := found[0]
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	tb.Fatalf("metric %s: unsupported type", name)
	return 0
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i < len(labels); i += 2 {
		ok := false
		for _, lp := range m.Label {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
