// Command mapbots joins N bots to one map and drives workload W1 (docs/benchmarks.md):
// each bot makes a movement input at 30 Hz with a direction that changes every 0.75 to
// 1.25 s, sent batched, one message per snapshot received (-each-input: one per input),
// and a ping every second. After a warm-up it measures a window and prints, per
// client, snapshots per second, kbit/s down, entities in view, round trips and drops,
// and the bots' own CPU.
//
// With -moves it records, phase by phase, how every bot goes to its map's next
// container when the map is upgraded live or restarted (scripts/bench-upgrade.sh).
//
// Workload W3 (a crowd in one spot) adds a probe player, joined first, that pings every
// -probe interval and is reported apart, and gathers the bots around the probe's spawn
// point (-spread with -gather).
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
	if len(args) > 0 && args[0] == probeChild {
		return runProbeChild(args[1:], os.Stdin, stdout, stderr)
	}
	fs := flag.NewFlagSet("mapbots", flag.ContinueOnError)
	fs.SetOutput(stderr)
	joinURL := fs.String("join", "http://127.0.0.1:8080", "public edge (or fake orchestrator) base URL to POST /api/v1/join to")
	mapURL := fs.String("map", "", "WebSocket URL to dial instead of the join answer's ws path (straight at a map's game port)")
	n := fs.Int("n", 100, "number of bots (0 with -probe: the probe alone, on an empty map)")
	joinRate := fs.Int("join-rate", 100, "joins per second (0: all at once)")
	warmup := fs.Duration("warmup", 15*time.Second, "warm-up after every bot joined, before measuring")
	window := fs.Duration("window", 60*time.Second, "measurement window")
	idle := fs.Bool("idle", false, "bots stand still (measure an idle player's downstream)")
	shards := fs.Int("shards", 0, "sender goroutines (0: one per 64 bots)")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the bots' directions")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	spread := fs.String("spread", "", "orchestrator control URL: save every bot at a uniformly random position before it connects, speaking the control RPC in the map's place (with the map's own credential from MAP_CREDENTIAL; benchmarks only)")
	size := fs.Float64("size", 2000, "with -spread: the map's width and height in units")
	into := fs.String("into", "", "with -spread: save every bot on this map instance (ready, e.g. created through the admin API) instead of the default map, so its second join goes there (workload W1 through the edge)")
	intoMap := fs.String("into-map", "", "with -into: that instance's map id")
	serverPID := fs.Int("server-pid", 0, "map server process to measure (CPU, RSS) over the window, as the host sees it")
	metricsURL := fs.String("metrics", "", "the map's control /metrics URL (credential from MAP_ORCH_CREDENTIAL, as the map was started with) for tick times, snapshots and drops")
	edgePID := fs.Int("edge-pid", 0, "edge process to measure (CPU, RSS) over the window, when the bots join through it")
	probeEvery := fs.Duration("probe", 0, "join a probe player first that stands still and pings at this interval; its round trips and snapshot rate are reported apart (workload W3: 250ms)")
	resume := fs.Bool("resume", false, "a bot whose connection drops resumes at once with its resume token, as the page does; the report counts the resumes and how long they took (an edge replacement: scripts/bench-handover.sh)")
	joinLoopRate := fs.Int("join-loop", 0, "during the window, this many newcomers a second join through the edge (join, hello, close), each on new connections; the report counts those refused")
	movesList := fs.String("moves", "", "comma-separated phases (e.g. upgrade,restart): every bot records how it goes to the map's next container (a moving event, a transfer, a resume, a rejoin: socket closed, pause, rollback) and comes back by itself (-resume, -rejoin); SIGUSR1 ends the current phase, the last one ends the window, and the report has one summary a phase (scripts/bench-upgrade.sh)")
	rejoin := fs.Bool("rejoin", false, "with -resume: a bot whose resume fails joins anew as it joined first (a new character), retrying for 30 s")
	speed := fs.Float64("speed", 5, "with -moves: the speed the map moves a bot at, units/s (W1's 5), for the rollback its own input explains")
	eachInput := fs.Bool("each-input", false, "send every input at once in a message of its own, as clients did before inputs were batched per snapshot (a before/after comparison of the message rate)")
	gather := fs.Float64("gather", 0, "with -spread and -probe: save every bot within this many units of the probe's spawn position instead of all over the map (workload W3)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *n < 0 || (*n == 0 && *probeEvery <= 0) || *window <= 0 {
		fmt.Fprintln(stderr, "mapbots: -n and -window must be positive (-n 0 only with -probe)")
		return 2
	}
	if *into != "" && (*spread == "" || *intoMap == "") {
		fmt.Fprintln(stderr, "mapbots: -into needs -spread and -into-map")
		return 2
	}
	if *gather > 0 && (*spread == "" || *probeEvery <= 0) {
		fmt.Fprintln(stderr, "mapbots: -gather needs -spread and -probe")
		return 2
	}

	names := phaseNames(*movesList)
	if len(names) > 0 {
		*resume = true
	}
	// Taken first: SIGUSR1 would otherwise end the process.
	usr1 := make(chan os.Signal, 1)
	if len(names) > 0 {
		signal.Notify(usr1, syscall.SIGUSR1)
		defer signal.Stop(usr1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := &client.Swarm{JoinURL: *joinURL, MapURL: *mapURL, N: *n, JoinPerSec: *joinRate, Idle: *idle, Shards: *shards,
		Seed: *seed, Rejoin: *rejoin, Options: client.Options{NoAutoAck: !*idle, SendEachInput: *eachInput, Resume: *resume, TrackMoves: len(names) > 0}}
	if *spread != "" {
		s.Spread = &client.Spread{ControlURL: *spread, Secret: os.Getenv("MAP_CREDENTIAL"), Width: *size, Height: *size,
			IntoMap: *intoMap, IntoInstance: *into}
	}
	// Memory before anyone joins, for the cost of a connection.
	var w, edge *watcher
	if *serverPID > 0 {
		w = &watcher{pid: *serverPID, metrics: *metricsURL, secret: os.Getenv("MAP_ORCH_CREDENTIAL"), hc: &http.Client{Timeout: 5 * time.Second}}
		w.rssBefore, _ = procRSSMB(w.pid)
	}
	if *edgePID > 0 {
		edge = &watcher{pid: *edgePID}
		edge.rssBefore, _ = procRSSMB(edge.pid)
	}
	var pr *prober
	if *probeEvery > 0 {
		var err error
		if pr, err = startProbe(ctx, *joinURL, *mapURL, *probeEvery); err != nil {
			fmt.Fprintln(stderr, "mapbots:", err)
			return 1
		}
		defer pr.close()
		x, y, err := pr.position()
		if err != nil {
			fmt.Fprintln(stderr, "mapbots:", err)
			return 1
		}
		if *gather > 0 {
			s.Spread.CX, s.Spread.CY, s.Spread.Radius = x, y, *gather
			fmt.Fprintf(stderr, "mapbots: gathering the bots within %.0f units of (%.0f, %.0f)\n", *gather, x, y)
		}
	}
	start := time.Now()
	if *n > 0 {
		if err := s.Connect(ctx); err != nil {
			fmt.Fprintln(stderr, "mapbots:", err)
			return 1
		}
	}
	defer s.Close()
	fmt.Fprintf(stderr, "mapbots: %d of %d bots joined in %.1fs (%d failed); warming up %s\n",
		len(s.Bots()), *n, time.Since(start).Seconds(), s.JoinFailures, *warmup)
	if s.JoinError != nil {
		fmt.Fprintln(stderr, "mapbots: the first join that failed:", s.JoinError)
	}

	driving, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Drive(driving); close(done) }()
	defer func() { cancel(); <-done }()

	if !sleep(ctx, *warmup) {
		return 1
	}
	var p0, e0 probe
	var err error
	if w != nil {
		if p0, err = w.probe(); err != nil {
			fmt.Fprintln(stderr, "mapbots: measure the server:", err)
			return 1
		}
	}
	if edge != nil {
		if e0, err = edge.probe(); err != nil {
			fmt.Fprintln(stderr, "mapbots: measure the edge:", err)
			return 1
		}
	}
	s.ResetStats()
	if pr != nil {
		if err := pr.reset(); err != nil {
			fmt.Fprintln(stderr, "mapbots:", err)
			return 1
		}
	}
	var joins *joinLoop
	joining, stopJoins := context.WithCancel(ctx)
	defer stopJoins()
	if *joinLoopRate > 0 {
		joins = startJoinLoop(joining, *joinURL, *joinLoopRate)
	}
	cpu0, t0 := cpuTime(), time.Now()
	fmt.Fprintf(stderr, "mapbots: measuring %s\n", *window)
	var ps []Phase
	if len(names) > 0 {
		step := *speed
		if *idle {
			step = 0
		}
		ps = phases(ctx, names, *window, usr1, s, joins, step)
		if ctx.Err() != nil {
			return 1
		}
	} else if !sleep(ctx, *window) {
		return 1
	}
	elapsed := time.Since(t0)
	r := s.Report(elapsed)
	botsCPU := cpuTime() - cpu0
	r.BotsCPUPercent = 100 * botsCPU.Seconds() / elapsed.Seconds()
	out := Result{N: *n, Bots: r, Phases: ps}
	if joins != nil {
		stopJoins()
		jl := joins.stop()
		out.JoinLoop = &jl
	}
	conns := len(s.Bots())
	if pr != nil {
		r, err := pr.report(elapsed)
		if err != nil {
			fmt.Fprintln(stderr, "mapbots:", err)
			return 1
		}
		out.Probe = &r
		conns++
	}
	var edgeCPU float64
	if edge != nil {
		e1, err := edge.probe()
		if err != nil {
			fmt.Fprintln(stderr, "mapbots: measure the edge:", err)
			return 1
		}
		srv := edge.measure(e0, e1, botsCPU.Seconds())
		edgeCPU = (e1.cpu - e0.cpu)
		out.Edge = &Process{CPUPercent: srv.CPUPercent, RSSMB: srv.RSSMB, RSSBeforeMB: edge.rssBefore, KBPerConn: perConn(srv.RSSMB, edge.rssBefore, conns)}
	}
	if w != nil {
		p1, err := w.probe()
		if err != nil {
			fmt.Fprintln(stderr, "mapbots: measure the server:", err)
			return 1
		}
		srv := w.measure(p0, p1, botsCPU.Seconds()+edgeCPU)
		srv.RSSBeforeMB, srv.KBPerConn = w.rssBefore, perConn(srv.RSSMB, w.rssBefore, conns)
		out.Server = &srv
	}
	if *asJSON {
		b, _ := json.Marshal(out)
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	if srv := out.Server; srv != nil {
		fmt.Fprintf(stdout, "server CPU %.1f%% of one core, RSS %.1f MB (%.1f KB per connection), tick p50 %.3f ms p99 %.3f ms, interval p99 %.1f ms, %.0f snapshots/s, %.0f dropped, foreign load %.1f%%\n",
			srv.CPUPercent, srv.RSSMB, srv.KBPerConn, srv.TickP50Ms, srv.TickP99Ms, srv.IntervalP99Ms, srv.SnapshotsPerS, srv.DroppedClients, srv.ForeignCPUPercent)
	}
	if e := out.Edge; e != nil {
		fmt.Fprintf(stdout, "edge CPU %.1f%% of one core, RSS %.1f MB (%.1f KB per connection)\n", e.CPUPercent, e.RSSMB, e.KBPerConn)
	}
	if p := out.Probe; p != nil {
		fmt.Fprintf(stdout, "probe rtt p50 %.2f ms p99 %.2f ms max %.2f ms, %.2f snapshots/s, %.1f entities in view, dropped %d\n",
			p.RTTP50Ms, p.RTTP99Ms, p.RTTMaxMs, p.SnapshotsPerSec, p.EntitiesInView, p.Dropped)
	}
	fmt.Fprintf(stdout, "bots %d (join failures %d, dropped %d) window %.1fs\n", r.Bots, r.JoinFailures, r.Dropped, r.WindowSec)
	if *resume {
		fmt.Fprintf(stdout, "resumes %d: p50 %.1f ms p99 %.1f ms max %.1f ms from the drop to the new welcome\n", r.Resumes, r.ResumeP50Ms, r.ResumeP99Ms, r.ResumeMaxMs)
	}
	for _, p := range out.Phases {
		fmt.Fprintf(stdout, "%s (%.1fs): %d of %d bots moved on their socket, %d sockets closed (%d transferred, %d resumed, %d rejoined, %d lost); pause p50 %.1f ms p99 %.1f ms max %.1f ms; rollback max %.2f units (%.2f beyond one tick), %d rolled back of %d compared\n",
			p.Name, p.DurationSec, p.Moved, p.Bots, p.SocketsClosed, p.Transferred, p.Resumed, p.Rejoined, p.Lost, p.PauseP50Ms, p.PauseP99Ms, p.PauseMaxMs,
			p.RollbackMaxRaw, p.RollbackMaxTick, p.RolledBack, p.Compared)
		if jl := p.JoinLoop; jl != nil {
			fmt.Fprintf(stdout, "  newcomers: %d joined, %d refused, %d failed%s\n", jl.Joins, jl.Refused, jl.Failed, firstError(jl.FirstError))
		}
	}
	if jl := out.JoinLoop; jl != nil {
		fmt.Fprintf(stdout, "newcomers: %d joined (p50 %.1f ms, max %.1f ms), %d refused, %d failed%s\n", jl.Joins, jl.P50Ms, jl.MaxMs, jl.Refused, jl.Failed, firstError(jl.FirstError))
	}
	fmt.Fprintf(stdout, "snapshots/s per client %.2f (min %.2f), full %d, undecodable %d\n", r.SnapshotsPerSec, r.MinSnapshotsSec, r.FullSnapshots, r.BadSnapshots)
	fmt.Fprintf(stdout, "kbit/s down per client %.2f (snapshots %.2f), up %.2f in %.1f messages a second\n", r.KbitDown, r.KbitSnapshots, r.KbitUp, r.MessagesUp)
	fmt.Fprintf(stdout, "entities in view %.1f, %.2f snapshot bytes per entity\n", r.EntitiesInView, r.BytesPerEntity)
	fmt.Fprintf(stdout, "rtt p50 %.2f ms p99 %.2f ms, errors %d\n", r.RTTP50Ms, r.RTTP99Ms, r.Errors)
	fmt.Fprintf(stdout, "bots CPU %.1f%% of one core\n", r.BotsCPUPercent)
	return 0
}

// Result is the JSON report: the bots' figures and, when measured, the server's.
type Result struct {
	N      int            `json:"n"`
	Bots   client.Report  `json:"bots"`
	Probe  *client.Report `json:"probe,omitempty"`
	Server *Server        `json:"server,omitempty"`
	Edge   *Process       `json:"edge,omitempty"`
	// JoinLoop is the newcomers of -join-loop.
	JoinLoop *JoinLoop `json:"joinLoop,omitempty"`
	// Phases are the phases of -moves.
	Phases []Phase `json:"phases,omitempty"`
}

// Process is what the bots measure of a process besides the map (the edge).
type Process struct {
	CPUPercent  float64 `json:"cpuPercent"`
	RSSMB       float64 `json:"rssMb"`
	RSSBeforeMB float64 `json:"rssBeforeMb"`
	KBPerConn   float64 `json:"kbPerConnection"`
}

func firstError(e string) string {
	if e == "" {
		return ""
	}
	return "; first: " + e
}

// perConn is the memory a process grew by per connection, in KB, from its RSS before
// the players joined to the end of the window.
func perConn(rssMB, beforeMB float64, conns int) float64 {
	if conns == 0 || beforeMB == 0 {
		return 0
	}
	return (rssMB - beforeMB) * 1024 / float64(conns)
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
