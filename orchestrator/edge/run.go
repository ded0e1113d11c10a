package edge

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/envconf"
)

// Version identifies the edge's build; `make build` stamps it with -ldflags, as it
// stamps the orchestrator's and the map server's, so that the edge needs no other part
// of the orchestrator to say what it is.
var Version = "dev"

// Run is the edge process: `edge` (or `orchestrator edge`, as the image runs it)
// configured by EDGE_* variables, `edge healthcheck`, and `edge -h`. It serves until
// SIGINT or SIGTERM and then drains, or until an edge that replaces it took its
// listeners over and then closes its players' connections, which resume through the
// new edge. It returns the exit code.
func Run(args, environ []string, stdout, stderr io.Writer) int {
	var cfg Config
	cmd := envconf.Command{
		Name:  "edge",
		Title: "mapyard edge " + Version,
		Note:  "EDGE_STATIC_ROUTES is for benchmarks of the proxy only: with it the edge never asks the orchestrator for routes.",
		Healthcheck: func() error {
			if cfg.TLS() {
				// The public listener speaks HTTPS, for its host names only: the
				// loopback metrics listener answers the same /healthz.
				return Healthcheck(cfg.MetricsAddr)
			}
			return Healthcheck(cfg.PublicAddr)
		},
	}
	if code, done := cmd.Prepare(&cfg, args, environ, stdout, stderr); done {
		return code
	}
	runtime.GOMAXPROCS(cfg.Procs)
	log := envconf.NewLogger(stderr, cfg.LogLevel)
	e, err := New(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "edge: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := e.Open(); err != nil {
		log.Error("start failed", "err", err)
		return 1
	}
	log.Info("edge listening", "version", Version, "public", e.PublicURL(), "metrics", e.MetricsURL(), "http", e.HTTPURL(),
		"orchestrator", cfg.OrchURL, "procs", cfg.Procs, "staticRoutes", cfg.StaticRoutes != "", "handoverSocket", cfg.HandoverSocket)
	select {
	case <-ctx.Done():
		log.Info("draining", "connections", e.Proxy.Active(), "timeout", e.DrainTimeout.String())
	case <-e.HandedOver():
		log.Info("handed over to a new edge; closing the players' connections so that they resume there",
			"connections", e.Proxy.Active(), "spread", e.HandoverSpread.String())
	}
	if err := e.Close(context.Background()); err != nil {
		log.Warn("shutdown", "err", err)
	}
	log.Info("edge stopped")
	return 0
}

// Healthcheck asks the local listener on addr's port for /healthz; the images'
// healthcheck subcommands run it.
func Healthcheck(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + net.JoinHostPort("127.0.0.1", port) + "/healthz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/healthz answered %d", resp.StatusCode)
	}
	return nil
}
