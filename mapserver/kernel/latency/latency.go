// Package latency is the one way mapyard measures how long things take under load: a
// Recorder that goroutines add latencies to and that answers their quantiles, and
// OpenLoop, the schedule of an open-loop benchmark. The benchmarks of both trees (a
// critical event's round trip, a transfer's handoff, a commit, a warm-pool handout)
// and the bots' ping round trips report through it, so a p99 means the same thing in
// every figure of docs/benchmarks.md. It imports only the standard library (it builds
// for WebAssembly too), and sits in the kernel because both trees use it.
package latency

import (
	"slices"
	"sync"
	"time"
)

// Recorder holds latencies added from any goroutine and answers their quantiles. The
// zero value is ready to use; NewRecorder sizes it in advance.
type Recorder struct {
	mu      sync.Mutex
	samples []time.Duration
	sorted  bool
}

// NewRecorder returns a recorder with room for n samples, so that adding them
// allocates nothing while a benchmark runs.
func NewRecorder(n int) *Recorder {
	return &Recorder{samples: make([]time.Duration, 0, n)}
}

// Add records one latency.
func (r *Recorder) Add(d time.Duration) {
	r.mu.Lock()
	r.samples, r.sorted = append(r.samples, d), false
	r.mu.Unlock()
}

// AddAll records many latencies at once.
func (r *Recorder) AddAll(ds []time.Duration) {
	r.mu.Lock()
	r.samples, r.sorted = append(r.samples, ds...), false
	r.mu.Unlock()
}

// Len is how many latencies were recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.samples)
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of the recorded latencies: the
// (⌊q·n⌋+1)-th smallest of n, the largest for q = 1, and 0 when none was recorded. It
// is the rank every figure of mapyard's benchmarks has been read at, so figures stay
// comparable with the recorded history.
func (r *Recorder) Quantile(q float64) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.samples)
	if n == 0 {
		return 0
	}
	if !r.sorted {
		slices.Sort(r.samples)
		r.sorted = true
	}
	return r.samples[max(0, min(n-1, int(q*float64(n))))]
}

// Metrics is where a benchmark reports a figure: *testing.B.
type Metrics interface {
	ReportMetric(n float64, unit string)
}

// Report reports the 50th and 99th percentiles in milliseconds, as p50-ms and p99-ms:
// the two latency figures of every benchmark. It reports nothing when nothing was
// recorded.
func (r *Recorder) Report(m Metrics) {
	if r.Len() == 0 {
		return
	}
	m.ReportMetric(Ms(r.Quantile(0.5)), "p50-ms")
	m.ReportMetric(Ms(r.Quantile(0.99)), "p99-ms")
}

// Ms is d in milliseconds, at microsecond precision, as figures are written.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// OpenLoop is the schedule of an open-loop benchmark: operation i is offered at
// Start + i·Interval whether or not the ones before it have finished, and its latency
// is measured from that scheduled time. Queueing then shows in the latencies; a closed
// loop, which waits for each answer before the next call, would hide it (coordinated
// omission).
type OpenLoop struct {
	Start    time.Time
	Interval time.Duration
}

// NewOpenLoop starts a schedule of rate operations a second, now.
func NewOpenLoop(rate int) OpenLoop {
	return OpenLoop{Start: time.Now(), Interval: time.Second / time.Duration(rate)}
}

// At is operation i's scheduled time.
func (o OpenLoop) At(i int) time.Time { return o.Start.Add(time.Duration(i) * o.Interval) }

// Wait sleeps until operation i's scheduled time (it paces the offered load; it never
// waits for a result) and returns that time, which the operation's latency is
// measured from.
func (o OpenLoop) Wait(i int) time.Time {
	at := o.At(i)
	if d := time.Until(at); d > 0 {
		time.Sleep(d)
	}
	return at
}

// Due is how many operations are due by now: those whose scheduled time has come.
func (o OpenLoop) Due() int { return int(time.Since(o.Start)/o.Interval) + 1 }

// PerSecond is n operations over the time since Start: the rate actually achieved.
func (o OpenLoop) PerSecond(n int) float64 { return float64(n) / time.Since(o.Start).Seconds() }
