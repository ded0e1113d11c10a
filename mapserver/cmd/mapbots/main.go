// Command mapbots joins N bots to one map and drives workload W1 (docs/benchmarks.md):
// each bot sends a movement input at 30 Hz with a direction that changes every 0.75 to
// 1.25 s, and a ping every second. After a warm-up it measures a window and prints, per
// client, snapshots per second, kbit/s down, entities in view, round trips and drops,
// and the bots' own CPU.
//
//	mapbots -join http://127.0.0.1:8080 -n 250                               # through the public edge
//	mapbots -join http://127.0.0.1:8080 -map ws://127.0.0.1:7000/ws -n 250   # tickets from the edge or a
//	                                                                         # fake orchestrator, straight to the map
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mapyard/mapyard/mapserver/client"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mapbots", flag.ContinueOnError)
	fs.SetOutput(stderr)
	joinURL := fs.String("join", "http://127.0.0.1:8080", "public edge (or fake orchestrator) base URL to POST /api/v1/join to")
	mapURL := fs.String("map", "", "WebSocket URL to dial instead of the join answer's ws path (straight at a map's game port)")
	n := fs.Int("n", 100, "number of bots")
	joinRate := fs.Int("join-rate", 100, "joins per second (0: all at once)")
	warmup := fs.Duration("warmup", 15*time.Second, "warm-up after every bot joined, before measuring")
	window := fs.Duration("window", 60*time.Second, "measurement window")
	idle := fs.Bool("idle", false, "bots stand still (measure an idle player's downstream)")
	shards := fs.Int("shards", 0, "sender goroutines (0: one per 64 bots)")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the bots' directions")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	spread := fs.String("spread", "", "orchestrator control URL: save every bot at a uniformly random position before it connects, speaking the control RPC in the map's place (with the map's own credential from MAP_CREDENTIAL; benchmarks only)")
	size := fs.Float64("size", 2000, "with -spread: the map's width and height in units")
	serverPID := fs.Int("server-pid", 0, "map server process to measure (CPU, RSS) over the window, as the host sees it")
	metricsURL := fs.String("metrics", "", "the map's control /metrics URL (credential from MAP_ORCH_CREDENTIAL, as the map was started with) for tick times, snapshots and drops")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *n <= 0 || *window <= 0 {
		fmt.Fprintln(stderr, "mapbots: -n and -window must be positive")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := &client.Swarm{JoinURL: *joinURL, MapURL: *mapURL, N: *n, JoinPerSec: *joinRate, Idle: *idle, Shards: *shards,
		Seed: *seed, Options: client.Options{NoAutoAck: !*idle}}
	if *spread != "" {
		s.Spread = &client.Spread{ControlURL: *spread, Secret: os.Getenv("MAP_CREDENTIAL"), Width: *size, Height: *size}
	}
	start := time.Now()
	if err := s.Connect(ctx); err != nil {
		fmt.Fprintln(stderr, "mapbots:", err)
		return 1
	}
	defer s.Close()
	fmt.Fprintf(stderr, "mapbots: %d of %d bots joined in %.1fs (%d failed); warming up %s\n",
		len(s.Bots()), *n, time.Since(start).Seconds(), s.JoinFailures, *warmup)

	driving, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Drive(driving); close(done) }()
	defer func() { cancel(); <-done }()

	if !sleep(ctx, *warmup) {
		return 1
	}
	var w *watcher
	var p0 probe
	if *serverPID > 0 {
		w = &watcher{pid: *serverPID, metrics: *metricsURL, secret: os.Getenv("MAP_ORCH_CREDENTIAL"), hc: &http.Client{Timeout: 5 * time.Second}}
		var err error
		if p0, err = w.probe(); err != nil {
			fmt.Fprintln(stderr, "mapbots: measure the server:", err)
			return 1
		}
	}
	s.ResetStats()
	cpu0, t0 := cpuTime(), time.Now()
	fmt.Fprintf(stderr, "mapbots: measuring %s\n", *window)
	if !sleep(ctx, *window) {
		return 1
	}
	elapsed := time.Since(t0)
	r := s.Report(elapsed)
	botsCPU := cpuTime() - cpu0
	r.BotsCPUPercent = 100 * botsCPU.Seconds() / elapsed.Seconds()
	out := Result{N: *n, Bots: r}
	if w != nil {
		p1, err := w.probe()
		if err != nil {
			fmt.Fprintln(stderr, "mapbots: measure the server:", err)
			return 1
		}
		srv := w.measure(p0, p1, botsCPU.Seconds())
		out.Server = &srv
	}
	if *asJSON {
		b, _ := json.Marshal(out)
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	if srv := out.Server; srv != nil {
		fmt.Fprintf(stdout, "server CPU %.1f%% of one core, RSS %.1f MB, tick p50 %.3f ms p99 %.3f ms, interval p99 %.1f ms, %.0f snapshots/s, %.0f dropped, foreign load %.1f%%\n",
			srv.CPUPercent, srv.RSSMB, srv.TickP50Ms, srv.TickP99Ms, srv.IntervalP99Ms, srv.SnapshotsPerS, srv.DroppedClients, srv.ForeignCPUPercent)
	}
	fmt.Fprintf(stdout, "bots %d (join failures %d, dropped %d) window %.1fs\n", r.Bots, r.JoinFailures, r.Dropped, r.WindowSec)
	fmt.Fprintf(stdout, "snapshots/s per client %.2f (min %.2f), full %d, undecodable %d\n", r.SnapshotsPerSec, r.MinSnapshotsSec, r.FullSnapshots, r.BadSnapshots)
	fmt.Fprintf(stdout, "kbit/s down per client %.2f (snapshots %.2f), up %.2f\n", r.KbitDown, r.KbitSnapshots, r.KbitUp)
	fmt.Fprintf(stdout, "entities in view %.1f, %.2f snapshot bytes per entity\n", r.EntitiesInView, r.BytesPerEntity)
	fmt.Fprintf(stdout, "rtt p50 %.2f ms p99 %.2f ms, errors %d\n", r.RTTP50Ms, r.RTTP99Ms, r.Errors)
	fmt.Fprintf(stdout, "bots CPU %.1f%% of one core\n", r.BotsCPUPercent)
	return 0
}

// Result is the JSON report: the bots' figures and, when measured, the server's.
type Result struct {
	N      int           `json:"n"`
	Bots   client.Report `json:"bots"`
	Server *Server       `json:"server,omitempty"`
}

// sleep waits d; false means the process was told to stop.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// cpuTime is the CPU (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
