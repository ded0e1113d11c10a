// Command mapserver runs one map instance. The orchestrator starts it as a container;
// map developers run it alone against a fake orchestrator.
//
// Usage:
//
//	mapserver              run, configured by MAP_* environment variables
//	mapserver healthcheck  exit 0 if the local map server answers /health
//	mapserver -h           list every variable with its default
//
// Fault injection (tests of the orchestrator's supervision only, off by default):
// MAP_FAULT_EXIT_AFTER_MS=N makes the server exit with code 3 N ms after start, and
// MAP_FAULT_FAIL_HEALTH=true makes GET /health answer 503, and
// MAP_FAULT_IGNORE_SIGTERM=true makes it ignore SIGTERM (so a stop must kill it).
package main

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

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/app"
	"github.com/mapyard/mapyard/mapserver/kernel/envconf"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapenv"
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

func run(args, environ []string, stdout, stderr io.Writer) int {
	var cfg mapenv.Config
	cmd := envconf.Command{
		Name:  "mapserver",
		Title: "mapyard map server " + mapserver.Version,
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
	ident := app.NewIdentity(cfg.InstanceID, cfg.MapID, cfg.PoolID)
	log := slog.New(ident.Handler(envconf.NewLogger(stderr, cfg.LogLevel).Handler()))

	stopSignals := []os.Signal{syscall.SIGINT, syscall.SIGTERM}
	if cfg.FaultIgnoreSIGTERM {
		log.Warn("fault injection: ignoring SIGTERM")
		signal.Ignore(syscall.SIGTERM)
		stopSignals = stopSignals[:1]
	}
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	defer stop()

	m := &app.Main{Config: cfg, Log: log, Identity: ident}
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
