package main

// The soak's samples (every 10 s, per long-lived process) and its report (see
// soak_test.go).

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
)

// soakProc is one process's figures in a sample; -1 where it could not be read.
type soakProc struct {
	RSS        int64 // bytes
	Heap       int64 // bytes of heap in use
	Goroutines int64
	FDs        int64
}

// soakSample is what the soak sees every 10 s.
type soakSample struct {
	At time.Duration
	// Orch is the orchestrator's child process (/proc and its /metrics); Test is this
	// process, which runs the edge and the players; Maps are the three maps' containers
	// (their /metrics through the orchestrator's proxy).
	Orch, Test soakProc
	Maps       map[string]soakProc
	DB, WAL    int64
	Containers int // of the deployment, running or not
	Networks   int // the kit's map network, by name
	Restarts   int64
}

// sample takes a sample now and then every soakSampleEvery until ctx ends.
func (s *soak) sample(ctx context.Context) {
	for {
		smp := s.takeSample(ctx)
		s.mu.Lock()
		s.samples = append(s.samples, smp)
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(soakSampleEvery):
		}
	}
}

func (s *soak) takeSample(ctx context.Context) soakSample {
	smp := soakSample{At: time.Since(s.start).Round(time.Second), Maps: map[string]soakProc{}}
	smp.Orch = procOf(int(s.orchPID.Load()))
	om := s.metrics(ctx, s.control+httpkit.PathMetrics)
	smp.Orch.Goroutines, smp.Orch.Heap = metricSum(om, "go_goroutines"), metricSum(om, "go_memstats_heap_inuse_bytes")
	if smp.Restarts = metricSum(om, "mapyard_map_restarts_total"); om != nil {
		smp.Restarts = max(smp.Restarts, 0) // no series before the first restart
	}
	smp.Test = procOf(os.Getpid())
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	smp.Test.Goroutines, smp.Test.Heap = int64(runtime.NumGoroutine()), int64(ms.HeapInuse)
	for _, id := range []string{s.loot.InstanceID, s.hall.InstanceID, s.field.InstanceID} {
		mm := s.metrics(ctx, s.control+httpapi.PathMapMetrics+"/"+id)
		smp.Maps[id] = soakProc{RSS: metricSum(mm, "process_resident_memory_bytes"), Heap: metricSum(mm, "go_memstats_heap_inuse_bytes"),
			Goroutines: metricSum(mm, "go_goroutines"), FDs: metricSum(mm, "process_open_fds")}
	}
	smp.DB, smp.WAL = fileSize(s.k.dbPath), fileSize(s.k.dbPath+"-wal")
	smp.Containers, smp.Networks = s.containers(ctx), s.networks(ctx)
	return smp
}

// procOf reads a process's resident set and open descriptors from /proc.
func procOf(pid int) soakProc {
	p := soakProc{RSS: -1, Heap: -1, Goroutines: -1, FDs: -1}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				p.RSS = kb * 1024
			}
		}
	}
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		p.FDs = int64(len(fds))
	}
	return p
}

// metrics fetches a Prometheus text page with the root secret, or nil.
func (s *soak) metrics(ctx context.Context, url string) []byte {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil
	}
	req.Header.Set(httpkit.SecretHeader, s.k.secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	b, _ := io.ReadAll(resp.Body)
	return b
}

// metricSum sums every series of a metric in a Prometheus text page, or -1 when it has
// none.
func metricSum(page []byte, name string) int64 {
	sum, found := 0.0, false
	for line := range strings.SplitSeq(string(page), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			sum, found = sum+v, true
		}
	}
	if !found {
		return -1
	}
	return int64(sum)
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// containers counts the deployment's containers, running or not.
func (s *soak) containers(ctx context.Context) int {
	list, err := s.k.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", docker.LabelDeployment+"="+s.k.deployment))})
	if err != nil {
		return -1
	}
	return len(list)
}

// networks counts the networks named as the kit's map network.
func (s *soak) networks(ctx context.Context) int {
	list, err := s.k.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", s.network()))})
	if err != nil {
		return -1
	}
	n := 0
	for _, nw := range list {
		if nw.Name == s.network() {
			n++
		}
	}
	return n
}

// network is the kit's own map network (ORCH_MAP_NETWORK).
func (s *soak) network() string {
	for _, kv := range s.k.env {
		if v, ok := strings.CutPrefix(kv, "ORCH_MAP_NETWORK="); ok {
			return v
		}
	}
	return ""
}

// reference is the sample the end is compared with: 10 minutes in, or a third of the
// way for a shorter run.
func (s *soak) reference() soakSample {
	at := min(10*time.Minute, s.dur/3)
	for _, smp := range s.samples {
		if smp.At >= at {
			return smp
		}
	}
	return s.samples[0]
}

// around returns the last sample before at and the first one at least settle after end.
func (s *soak) around(at, end time.Time, settle time.Duration) (before, after *soakSample) {
	for i := range s.samples {
		smp := &s.samples[i]
		if t := s.start.Add(smp.At); t.Before(at) {
			before = smp
		} else if after == nil && !t.Before(end.Add(settle)) {
			after = smp
		}
	}
	return before, after
}

// report writes report.md and samples.tsv to bench-results/soak-<time>/ at the
// repository's root and returns the directory.
func (s *soak) report(checks []string) (string, error) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "bench-results", "soak-"+s.start.UTC().Format("20060102-150405"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var b strings.Builder
	ref, end := s.reference(), s.samples[len(s.samples)-1]
	fmt.Fprintf(&b, "# Soak %s\n\n%s, seed %d (`MAPYARD_SOAK_SEED=%d` reproduces the fault schedule), %d samples every %s.\n\n",
		s.start.UTC().Format(time.RFC3339), s.dur, s.seed, s.seed, len(s.samples), soakSampleEvery)
	fmt.Fprintf(&b, "## Processes\n\nThe reference sample is %s in (10 minutes in, or a third of a shorter run). "+
		"The test process runs the edge and every player.\n\n", ref.At)
	after := end
	if s.after != nil {
		after = *s.after
	}
	b.WriteString("| process | figure | at " + ref.At.String() + " | at end (" + end.At.String() + ") | end ÷ reference | once the players left |\n|---|---|---|---|---|---|\n")
	row := func(proc, fig string, a, z, l int64, unit func(int64) string) {
		ratio := "–"
		if a > 0 && z >= 0 {
			ratio = fmt.Sprintf("%.2f", float64(z)/float64(a))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", proc, fig, unit(a), unit(z), ratio, unit(l))
	}
	procRows := func(name string, a, z, l soakProc) {
		row(name, "RSS", a.RSS, z.RSS, l.RSS, mib)
		row(name, "heap in use", a.Heap, z.Heap, l.Heap, mib)
		row(name, "goroutines", a.Goroutines, z.Goroutines, l.Goroutines, count)
		row(name, "open FDs", a.FDs, z.FDs, l.FDs, count)
	}
	procRows("orchestrator", ref.Orch, end.Orch, after.Orch)
	procRows("edge + players (test process)", ref.Test, end.Test, after.Test)
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range end.Maps {
			if !yield(id) {
				return
			}
		}
	})
	for _, id := range ids {
		procRows("map "+id, ref.Maps[id], end.Maps[id], after.Maps[id])
	}
	row("database", "file", ref.DB, end.DB, after.DB, mib)
	row("database", "WAL", ref.WAL, end.WAL, after.WAL, mib)
	row("Docker", "containers", int64(ref.Containers), int64(end.Containers), int64(after.Containers), count)
	row("Docker", "map networks", int64(ref.Networks), int64(end.Networks), int64(after.Networks), count)
	row("orchestrator", "map restarts", ref.Restarts, end.Restarts, after.Restarts, count)

	b.WriteString("\n## Faults\n\nOpen FDs: the last sample before the fault, the first one 20 s or more after its recovery, " +
		"and when a sample first came back within 2 of the one before (the orchestrator's after its own kill are a new process's).\n\n" +
		"| at | fault | target | recovery | bound | orchestrator FDs | test process FDs | result |\n|---|---|---|---|---|---|---|---|\n")
	for _, f := range s.faults {
		before, after := s.around(f.Began, f.Ended, 20*time.Second)
		fds := func(get func(*soakSample) int64) string {
			if before == nil || after == nil {
				return "–"
			}
			back := "not by the end"
			for _, smp := range s.samples {
				if t := s.start.Add(smp.At); t.After(f.Ended) && get(&smp) >= 0 && get(&smp) <= get(before)+2 {
					back = "back in " + t.Sub(f.Ended).Round(time.Second).String()
					break
				}
			}
			return fmt.Sprintf("%d → %d (%s)", get(before), get(after), back)
		}
		result := "ok"
		if f.Err != "" {
			result = f.Err
		}
		if f.Note != "" {
			result += "; " + f.Note
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", f.Began.Sub(s.start).Round(time.Second), f.Kind, f.Target,
			f.Recovery.Round(time.Millisecond), f.Bound, fds(func(p *soakSample) int64 { return p.Orch.FDs }),
			fds(func(p *soakSample) int64 { return p.Test.FDs }), result)
	}
	section, err := s.charts(dir, ids)
	if err != nil {
		return "", err
	}
	b.WriteString(section)
	b.WriteString("\n## Checks\n\n")
	for _, c := range checks {
		b.WriteString("- " + c + "\n")
	}
	b.WriteString("\nEvery sample: `samples.tsv` beside this report.\n")
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "samples.tsv"), []byte(s.samplesTSV(ids)), 0o644)
}

// samplesTSV is every sample, one a line.
func (s *soak) samplesTSV(ids []string) string {
	var b strings.Builder
	b.WriteString("seconds\torch_rss\torch_heap\torch_goroutines\torch_fds\ttest_rss\ttest_heap\ttest_goroutines\ttest_fds")
	for _, id := range ids {
		fmt.Fprintf(&b, "\t%[1]s_rss\t%[1]s_heap\t%[1]s_goroutines\t%[1]s_fds", id)
	}
	b.WriteString("\tdb\twal\tcontainers\tnetworks\trestarts\n")
	for _, smp := range s.samples {
		fmt.Fprintf(&b, "%d", int(smp.At.Seconds()))
		for _, p := range append([]soakProc{smp.Orch, smp.Test}, mapProcs(smp, ids)...) {
			fmt.Fprintf(&b, "\t%d\t%d\t%d\t%d", p.RSS, p.Heap, p.Goroutines, p.FDs)
		}
		fmt.Fprintf(&b, "\t%d\t%d\t%d\t%d\t%d\n", smp.DB, smp.WAL, smp.Containers, smp.Networks, smp.Restarts)
	}
	return b.String()
}

func mapProcs(smp soakSample, ids []string) []soakProc {
	out := make([]soakProc, len(ids))
	for i, id := range ids {
		out[i] = smp.Maps[id]
	}
	return out
}

func mib(n int64) string {
	if n < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func count(n int64) string {
	if n < 0 {
		return "–"
	}
	return strconv.FormatInt(n, 10)
}
