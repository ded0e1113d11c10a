package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
)

// clockTicks is USER_HZ, the unit of /proc CPU times (100 on every Linux build that
// mapyard targets).
const clockTicks = 100

// Server is what the bots measure of the map server over the window, from /proc (CPU,
// RSS) and from its Prometheus metrics (tick times, snapshots, drops).
type Server struct {
	CPUPercent float64 `json:"cpuPercent"`
	RSSMB      float64 `json:"rssMb"`
	RSSIdleMB  float64 `json:"rssIdleMb,omitempty"`
	// RSSBeforeMB is the RSS before the bots joined, KBPerConn the growth since per
	// connected player.
	RSSBeforeMB    float64 `json:"rssBeforeMb,omitempty"`
	KBPerConn      float64 `json:"kbPerConnection,omitempty"`
	TickP50Ms      float64 `json:"tickP50Ms"`
	TickP99Ms      float64 `json:"tickP99Ms"`
	IntervalP50Ms  float64 `json:"intervalP50Ms"`
	IntervalP99Ms  float64 `json:"intervalP99Ms"`
	Overruns       float64 `json:"overruns"`
	SkippedTicks   float64 `json:"skippedTicks"`
	DroppedClients float64 `json:"droppedClients"`
	SnapshotsPerS  float64 `json:"snapshotsPerSec"`
	Entities       float64 `json:"entities"`
	// ForeignCPUPercent is the CPU the rest of the machine used (neither the server nor
	// the bots), in % of one core: the noise of a shared machine.
	ForeignCPUPercent float64 `json:"foreignCpuPercent"`
}

// probe reads the server's counters at one instant.
type probe struct {
	at      time.Time
	cpu     float64 // server CPU seconds
	machine float64 // busy CPU seconds of the whole machine
	metrics map[string]float64
}

// watcher samples a map server process and its metrics endpoint.
type watcher struct {
	pid       int
	metrics   string
	secret    string
	hc        *http.Client
	rssBefore float64 // MB, before the bots joined
}

func (w *watcher) probe() (probe, error) {
	p := probe{at: time.Now()}
	var err error
	if p.cpu, err = procCPU(w.pid); err != nil {
		return p, err
	}
	if p.machine, err = machineBusy(); err != nil {
		return p, err
	}
	if w.metrics != "" {
		if p.metrics, err = w.scrape(); err != nil {
			return p, err
		}
	}
	return p, nil
}

// measure turns two probes into the window's figures; bots is the bots' CPU seconds.
func (w *watcher) measure(a, b probe, bots float64) Server {
	sec := b.at.Sub(a.at).Seconds()
	s := Server{CPUPercent: 100 * (b.cpu - a.cpu) / sec}
	s.RSSMB, _ = procRSSMB(w.pid)
	s.ForeignCPUPercent = math.Max(0, 100*((b.machine-a.machine)-(b.cpu-a.cpu)-bots)/sec)
	if a.metrics == nil || b.metrics == nil {
		return s
	}
	d := func(name string) float64 { return b.metrics[name] - a.metrics[name] }
	s.TickP50Ms = 1000 * quantile(a.metrics, b.metrics, "mapyard_map_tick_duration_seconds", 0.5)
	s.TickP99Ms = 1000 * quantile(a.metrics, b.metrics, "mapyard_map_tick_duration_seconds", 0.99)
	s.IntervalP50Ms = 1000 * quantile(a.metrics, b.metrics, "mapyard_map_tick_interval_seconds", 0.5)
	s.IntervalP99Ms = 1000 * quantile(a.metrics, b.metrics, "mapyard_map_tick_interval_seconds", 0.99)
	s.Overruns = d("mapyard_map_tick_overruns_total")
	s.SkippedTicks = d("mapyard_map_ticks_skipped_total")
	s.DroppedClients = d("mapyard_map_dropped_clients_total")
	s.SnapshotsPerS = (d(`mapyard_map_snapshots_total{mode="full"}`) + d(`mapyard_map_snapshots_total{mode="delta"}`)) / sec
	s.Entities = b.metrics["mapyard_map_entities"]
	return s
}

// scrape reads the map's metrics as "name{labels}" → value.
func (w *watcher) scrape() (map[string]float64, error) {
	req, err := http.NewRequest(http.MethodGet, w.metrics, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(httpkit.SecretHeader, w.secret)
	resp, err := w.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: status %d", resp.StatusCode)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads Prometheus text exposition: every sample line as "name{labels}" →
// value.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// quantile estimates the q-quantile of a histogram's observations between two scrapes,
// interpolating linearly inside the bucket it falls in (as Prometheus'
// histogram_quantile does).
func quantile(a, b map[string]float64, name string, q float64) float64 {
	type bucket struct{ le, n float64 }
	var bs []bucket
	prefix := name + `_bucket{le="`
	for k, v := range b {
		le, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		le = strings.TrimSuffix(le, `"}`)
		bound := math.Inf(1)
		if le != "+Inf" {
			var err error
			if bound, err = strconv.ParseFloat(le, 64); err != nil {
				continue
			}
		}
		bs = append(bs, bucket{bound, v - a[k]})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	if len(bs) == 0 || bs[len(bs)-1].n <= 0 {
		return 0
	}
	rank := q * bs[len(bs)-1].n
	lo, prev := 0.0, 0.0
	for _, x := range bs {
		if x.n >= rank {
			if math.IsInf(x.le, 1) {
				return lo
			}
			if x.n == prev {
				return x.le
			}
			return lo + (x.le-lo)*(rank-prev)/(x.n-prev)
		}
		lo, prev = x.le, x.n
	}
	return lo
}

// procCPU returns a process's user + system CPU seconds from /proc/<pid>/stat.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces: fields count from after its closing paren.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad times", pid)
	}
	return (ut + st) / clockTicks, nil
}

// procRSSMB returns a process's VmRSS in MB (MiB).
func procRSSMB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// machineBusy returns the busy CPU seconds of the whole machine (user, nice, system,
// irq and softirq) from /proc/stat.
func machineBusy() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy float64
	for _, i := range []int{1, 2, 3, 6, 7} { // user nice system irq softirq (guest is in user)
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return 0, err
		}
		busy += v
	}
	return busy / clockTicks, nil
}
