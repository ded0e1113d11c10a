package latency_test

import (
	"sync"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/latency"
)

// figures collects what Report reports.
type figures map[string]float64

func (f figures) ReportMetric(n float64, unit string) { f[unit] = n }

// TestRecorder: quantiles at the rank the benchmarks read them, from samples added by
// many goroutines in any order; nothing reported from nothing.
func TestRecorder(t *testing.T) {
	r := latency.NewRecorder(100)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 100 - g; i > 0; i -= 4 { // 1..100 ms, shuffled over goroutines
				r.Add(time.Duration(i) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0, time.Millisecond}, {0.5, 51 * time.Millisecond}, {0.99, 100 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		if got := r.Quantile(tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	r.AddAll([]time.Duration{0}) // a new sample resorts
	if got := r.Quantile(0); got != 0 {
		t.Errorf("Quantile(0) after adding 0 = %v", got)
	}
	f := figures{}
	r.Report(f)
	if f["p50-ms"] != 50 || f["p99-ms"] != 99 { // 0..100 ms: 101 samples
		t.Errorf("report %v, want p50-ms 50 and p99-ms 99", f)
	}
	empty := figures{}
	(&latency.Recorder{}).Report(empty)
	if len(empty) != 0 {
		t.Errorf("an empty recorder reported %v", empty)
	}
}

// TestOpenLoop: operations are scheduled at the rate from the start, whatever happens
// to them.
func TestOpenLoop(t *testing.T) {
	o := latency.NewOpenLoop(1000)
	if o.At(250).Sub(o.Start) != 250*time.Millisecond {
		t.Fatalf("At(250) is %v after the start", o.At(250).Sub(o.Start))
	}
	if at := o.Wait(5); time.Now().Before(at) || at != o.At(5) {
		t.Fatalf("Wait(5) returned %v before its time", at)
	}
	if o.Due() < 6 {
		t.Fatalf("%d due after the sixth's time", o.Due())
	}
}
