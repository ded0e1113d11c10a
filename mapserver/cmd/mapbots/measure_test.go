package main

import (
	"math"
	"os"
	"strings"
	"testing"
)

func TestQuantile(t *testing.T) {
	parse := func(s string) map[string]float64 {
		m, err := parseMetrics(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a := parse(`# HELP h x
h_bucket{le="0.001"} 10
h_bucket{le="0.002"} 10
h_bucket{le="0.004"} 10
h_bucket{le="+Inf"} 10
`)
	// 100 observations in the window: 50 under 1 ms, 40 in (1, 2] ms, 10 in (2, 4] ms.
	b := parse(`h_bucket{le="0.001"} 60
h_bucket{le="0.002"} 100
h_bucket{le="0.004"} 110
h_bucket{le="+Inf"} 110
h_count 110
`)
	for _, c := range []struct{ q, want float64 }{{0.5, 0.001}, {0.7, 0.0015}, {0.95, 0.003}} {
		if got := quantile(a, b, "h", c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("q%.2f = %v, want %v", c.q, got, c.want)
		}
	}
	if got := quantile(a, a, "h", 0.5); got != 0 {
		t.Errorf("no observations: %v, want 0", got)
	}
}

func TestProc(t *testing.T) {
	pid := os.Getpid()
	if cpu, err := procCPU(pid); err != nil || cpu < 0 {
		t.Fatalf("procCPU: %v %v", cpu, err)
	}
	if rss, err := procRSSMB(pid); err != nil || rss <= 0 {
		t.Fatalf("procRSSMB: %v %v", rss, err)
	}
	if busy, err := machineBusy(); err != nil || busy <= 0 {
		t.Fatalf("machineBusy: %v %v", busy, err)
	}
}
