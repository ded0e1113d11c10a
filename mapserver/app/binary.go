package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/envconf"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapenv"
)

// Binary is a map server program: every game's binary is this life around its own
// game, so that each image obeys the map contract the same way (the MAP_* environment,
// `healthcheck`, SIGTERM, the fault injection of the supervisor's tests).
type Binary struct {
	// Name and Title are what `-h` prints.
	Name, Title string
	// NewGame builds the game; nil means the reference game (Main.NewGame).
	NewGame gameapi.New
}

// Run runs the map server until SIGTERM or SIGINT and returns the exit status: 0 for a
// clean stop, 1 when it could not start. A game that panics ends the process with
// Go's status 2 (tickloop.Loop logs the panic first).
//
// Fault injection (tests of the orchestrator's supervision only, off by default):
// MAP_FAULT_EXIT_AFTER_MS=N makes the server exit with code 3 N ms after start,
// MAP_FAULT_FAIL_HEALTH=true makes GET /health answer 503,
// MAP_FAULT_IGNORE_SIGTERM=true makes it ignore SIGTERM (so a stop must kill it),
// MAP_FAULT_PANIC_AT_TICK=N makes the game panic in its Nth tick,
// MAP_FAULT_HANDOFF_DELAY_MS=N holds a live upgrade's handoff cut back N ms (Main.Open)
// and MAP_FAULT_ALLOCATE_ON_SIGUSR1=true makes a SIGUSR1 start an allocation without
// bound, so the container's memory limit ends the map as an out-of-memory kill.
func (b Binary) Run(args, environ []string, stdout, stderr io.Writer) int {
	var cfg mapenv.Config
	cmd := envconf.Command{
		Name:  b.Name,
		Title: b.Title,
		Note: "MAP_FAULT_* variables inject faults for tests of the orchestrator's supervision only;\n" +
			"they are off by default and a deployment never sets them.",
		Healthcheck: func() error { return healthcheck(cfg) },
	}
	if code, done := cmd.Prepare(&cfg, args, environ, stdout, stderr); done {
		return code
	}

	if cfg.GCPercent > 0 {
		debug.SetGCPercent(cfg.GCPercent)
	}
	ident := NewIdentity(cfg.InstanceID, cfg.MapID, cfg.PoolID)
	log := slog.New(ident.Handler(envconf.NewLogger(stderr, cfg.LogLevel).Handler()))

	stopSignals := []os.Signal{syscall.SIGINT, syscall.SIGTERM}
	if cfg.FaultIgnoreSIGTERM {
		log.Warn("fault injection: ignoring SIGTERM")
		signal.Ignore(syscall.SIGTERM)
		stopSignals = stopSignals[:1]
	}
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	defer stop()

	m := &Main{Config: cfg, Log: log, Identity: ident, NewGame: b.NewGame}
	if err := m.Open(); err != nil {
		log.Error("start failed", "err", err)
		m.Close()
		return 1
	}
	if cfg.FaultExitAfterMS > 0 {
		log.Warn("fault injection: exiting with code 3 after a delay", "afterMs", cfg.FaultExitAfterMS)
		time.AfterFunc(time.Duration(cfg.FaultExitAfterMS)*time.Millisecond, func() {
			log.Error("fault injection: exiting with code 3")
			os.Exit(3)
		})
	}
	if cfg.FaultAllocOnSIGUSR1 {
		log.Warn("fault injection: SIGUSR1 allocates memory until the memory limit kills the map")
		allocateOnSignal(log)
	}

	<-ctx.Done()
	log.Info("stopping: players are closed with 1001 and their state is pushed")
	if err := m.Close(); err != nil {
		log.Error("shutdown", "err", err)
		return 1
	}
	log.Info("stopped cleanly")
	return 0
}

// healthcheck asks the local control listener for /health; the image's HEALTHCHECK runs it.
func healthcheck(cfg mapenv.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := mapcontract.NewMapClient(3*time.Second).Health(ctx, "http://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.ControlPort)), cfg.OrchCredential)
	return err
}
