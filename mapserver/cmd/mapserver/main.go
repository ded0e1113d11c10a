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
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/envconf"
	"github.com/mapyard/mapyard/mapserver/httpapi"
	"github.com/mapyard/mapyard/mapserver/mapcontrol"
	"github.com/mapyard/mapyard/mapserver/mapgen"
	"github.com/mapyard/mapyard/mapserver/orchlink"
	"github.com/mapyard/mapyard/mapserver/ws"
	"github.com/mapyard/mapyard/orchestrator/control"
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

func run(args, environ []string, stdout, stderr io.Writer) int {
	var cfg mapserver.Config
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

	log := envconf.NewLogger(stderr, cfg.LogLevel).
		With("instance", cfg.InstanceID, "map", cfg.MapID)

	stopSignals := []os.Signal{syscall.SIGINT, syscall.SIGTERM}
	if cfg.FaultIgnoreSIGTERM {
		log.Warn("fault injection: ignoring SIGTERM")
		signal.Ignore(syscall.SIGTERM)
		stopSignals = stopSignals[:1]
	}
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	defer stop()

	srv := httpapi.NewServer(cfg.OrchCredential, httpapi.Health{
		Status: "ok", InstanceID: cfg.InstanceID, MapID: cfg.MapID, Version: mapserver.Version,
	}, log)
	srv.Blank, srv.FailHealth = cfg.Blank, cfg.FaultFailHealth
	world := ws.NewWorld()
	orch := control.NewClient(cfg.OrchURL, cfg.Credential)
	players := ws.NewServer(orch, world, cfg.TickHz, cfg.SnapshotHz, log)
	players.AllowedOrigins = ws.ParseOrigins(cfg.AllowedOrigins)
	srv.HandleGame("/ws", players)
	srv.GameAddr = net.JoinHostPort(cfg.ListenHost, strconv.Itoa(cfg.GamePort))
	srv.ControlAddr = net.JoinHostPort(cfg.ListenHost, strconv.Itoa(cfg.ControlPort))
	if err := srv.Open(); err != nil {
		log.Error("start failed", "err", err)
		return 1
	}
	log.Info("map server listening", "gamePort", srv.GamePort(), "controlPort", srv.ControlPort(), "version", mapserver.Version)

	link := orchlink.New(orch, control.MapReady{
		InstanceID:  cfg.InstanceID,
		MapID:       cfg.MapID,
		GamePort:    srv.GamePort(),
		ControlPort: srv.ControlPort(),
		Version:     mapserver.Version,
	}, cfg.Heartbeat(), log)
	link.Players = players.Players
	srv.OnStart = func(r mapcontrol.StartInstance, mc mapgen.MapConfig) {
		link.Rebind(r.InstanceID, r.MapID)
		// Generate off the request path: a warm-pool handout answers at once, and the
		// world (milliseconds for a 2 km map) is ready before a player can arrive.
		go func() {
			start := time.Now()
			w, err := mapgen.Generate(mc)
			if err != nil {
				log.Error("generate world", "err", err)
				return
			}
			srv.SetWorldHash(w.Hash())
			world.Set(mc, w.Hash())
			log.Info("world generated", "worldHash", w.Hash(), "seed", mc.Seed, "tookMs", time.Since(start).Milliseconds())
		}()
	}
	if cfg.FaultExitAfterMS > 0 {
		log.Warn("fault injection: exiting with code 3 after a delay", "afterMs", cfg.FaultExitAfterMS)
		time.AfterFunc(time.Duration(cfg.FaultExitAfterMS)*time.Millisecond, func() {
			log.Error("fault injection: exiting with code 3")
			os.Exit(3)
		})
	}
	linkDone := make(chan struct{})
	go func() { link.Run(ctx); close(linkDone) }()

	<-ctx.Done()
	log.Info("stopping")
	<-linkDone
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Close(shutdown); err != nil {
		log.Error("shutdown", "err", err)
		return 1
	}
	log.Info("stopped cleanly")
	return 0
}

// healthcheck asks the local control listener for /health; the image's HEALTHCHECK runs it.
func healthcheck(cfg mapserver.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := mapcontrol.NewMapClient(3*time.Second).Health(ctx, "http://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.ControlPort)), cfg.OrchCredential)
	return err
}
