// Command fakeorch is the orchestrator's side of the control RPC without Docker or a
// database to set up, for map developers: run it, start a map server by hand against it,
// and join with the dev tickets it mints. Everything a map talks to — registration,
// heartbeats, redeem, transfers, snapshot and critical-event persistence — is the real
// orchestrator code over a throwaway SQLite file.
//
//	bin/fakeorch &     # prints MAP_CREDENTIAL and MAP_ORCH_CREDENTIAL for dev-1
//	docker run --rm --network host -e MAP_LISTEN_HOST=127.0.0.1 -e MAP_INSTANCE_ID=dev-1 \
//	  -e MAP_ORCH_URL=http://127.0.0.1:9000 -e MAP_CREDENTIAL=<printed> -e MAP_ORCH_CREDENTIAL=<printed> mapyard/map
//	curl -XPOST localhost:8080/api/v1/join
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/envconf"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/admission"
	"github.com/mapyard/mapyard/orchestrator/fake"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
	"github.com/mapyard/mapyard/orchestrator/ticket"
)

// Config is the fake orchestrator's environment: the orchestrator's own variables for
// the control RPC (orchestrator.RPCConfig: the same names, rules and meanings), with
// the defaults of a developer's machine (devDefaults), and what only the fake reads:
// further maps to print credentials for, and a MapConfig file.
type Config struct {
	orchestrator.RPCConfig
	DevInstances  string `env:"ORCH_DEV_INSTANCES" envDefault:"" help:"comma-separated further instance ids to print map credentials for (to run several maps, e.g. for transfers)"`
	MapConfigFile string `env:"ORCH_FAKE_MAP_CONFIG" help:"MapConfig JSON file sent to the map that registers as its instanceId (default: the map's template); benchmarks use it"`
}

// devDefaults are the fake's defaults where they differ from the orchestrator's: joins
// on :8080, where a kit's edge would answer them, and a map instance the developer
// starts by hand, dev-1. They are presets, so -h shows them and the environment
// overrides them (envconf.Load).
func devDefaults() Config {
	return Config{RPCConfig: orchestrator.RPCConfig{PublicAddr: "127.0.0.1:8080", DefaultInstanceID: "dev-1"}}
}

// devInstances are the ids of ORCH_DEV_INSTANCES.
func (c *Config) devInstances() []string {
	var ids []string
	for _, id := range strings.Split(c.DevInstances, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// Validate checks the values, naming the variable: the orchestrator's rules, then the
// fake's own.
func (c *Config) Validate() error {
	if err := c.RPCConfig.Validate(); err != nil {
		return err
	}
	for _, id := range c.devInstances() {
		if !record.ValidName(id) {
			return fmt.Errorf("ORCH_DEV_INSTANCES: %q must be %s", id, record.IDRule)
		}
	}
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

func run(args, environ []string, stdout, stderr io.Writer) int {
	cfg := devDefaults()
	cmd := envconf.Command{Name: "fakeorch", Title: "mapyard fake orchestrator " + orchestrator.Version,
		Note: "The ORCH_* variables are the orchestrator's own, with the defaults of a developer's machine.\n" +
			"Listeners are for this machine only; the database is a temporary file removed at exit, and a\n" +
			"generated secret is kept nowhere: each map gets the credentials printed for it."}
	if code, done := cmd.Prepare(&cfg, args, environ, stdout, stderr); done {
		return code
	}
	m := &Main{Config: cfg, Log: envconf.NewLogger(stderr, cfg.LogLevel)}
	if err := m.Run(); err != nil {
		m.Log.Error("start failed", "err", err)
		m.Close()
		return 1
	}
	fmt.Fprintf(stdout, "fake orchestrator ready: join at %s/api/v1/join; start each map with\n", m.HTTP.PublicURL())
	for _, id := range append([]string{cfg.DefaultInstanceID}, cfg.devInstances()...) {
		creds, err := fake.DevCredentials(m.Root, id)
		if err != nil {
			m.Log.Error("credentials", "instance", id, "err", err)
			m.Close()
			return 1
		}
		fmt.Fprintf(stdout, "  MAP_ORCH_URL=%s MAP_INSTANCE_ID=%s %s\n", m.HTTP.ControlURL(), id, strings.Join(creds, " "))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	if err := m.Close(); err != nil {
		m.Log.Error("shutdown", "err", err)
		return 1
	}
	return 0
}

// Main is the fake orchestrator process, reusable by tests.
type Main struct {
	Config Config
	Log    *slog.Logger
	Secret string
	// Root is derived from Secret; it mints the credentials printed for maps.
	Root *keys.Root

	dir       string
	DB        *sqlite.DB
	Maps      *fake.Registry
	Admission *admission.Service
	HTTP      *httpapi.Server
}

// Run opens a throwaway store and both listeners.
func (m *Main) Run() (err error) {
	if m.Secret = m.Config.Secret; m.Secret == "" {
		m.Secret = ticket.NewID(24)
	}
	if m.dir, err = os.MkdirTemp("", "mapyard-fakeorch-"); err != nil {
		return err
	}
	m.DB = sqlite.NewDB(filepath.Join(m.dir, "fake.db"))
	m.DB.Logger = m.Log
	if err := m.DB.Open(); err != nil {
		return err
	}
	if m.Root, err = keys.NewRoot(m.Secret); err != nil {
		return err
	}
	m.Maps = fake.NewRegistry(m.Root, m.Config.DefaultInstanceID, m.Log)
	if m.Config.MapConfigFile != "" {
		if err := m.loadMapConfig(m.Config.MapConfigFile); err != nil {
			return err
		}
	}
	m.Admission = admission.NewService(m.Root, m.DB, m.Maps, m.Config.DefaultInstanceID, m.Log)
	m.Admission.JoinTTL = envconf.Ms(m.Config.JoinTicketTTLMS)
	m.Admission.TransferTTL = envconf.Ms(m.Config.TransferTokenTTLMS)
	if err := m.Admission.Open(); err != nil {
		return err
	}
	m.HTTP = httpapi.NewServer(m.Maps, m.Admission, m.DB, m.Root, m.Log)
	m.HTTP.PublicAddr, m.HTTP.ControlAddr = m.Config.PublicAddr, m.Config.ControlAddr
	if err := m.HTTP.Open(); err != nil {
		return err
	}
	m.Log.Info("fake orchestrator listening", "public", m.HTTP.PublicURL(), "control", m.HTTP.ControlURL())
	return nil
}

// loadMapConfig reads a MapConfig file and hands it to the map of its instance.
func (m *Main) loadMapConfig(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("ORCH_FAKE_MAP_CONFIG: %w", err)
	}
	c, err := mapgen.Parse(raw)
	if err != nil {
		return fmt.Errorf("ORCH_FAKE_MAP_CONFIG %s: %w", path, err)
	}
	m.Maps.Configs = map[string]json.RawMessage{c.InstanceID: raw}
	m.Log.Info("map config loaded", "instance", c.InstanceID, "map", c.MapID)
	return nil
}

// Close stops the listeners and removes the throwaway database.
func (m *Main) Close() error {
	var errs []error
	if m.HTTP != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, m.HTTP.Close(ctx))
		cancel()
	}
	if m.Admission != nil {
		errs = append(errs, m.Admission.Close())
	}
	if m.DB != nil {
		errs = append(errs, m.DB.Close())
	}
	if m.dir != "" {
		errs = append(errs, os.RemoveAll(m.dir))
	}
	return errors.Join(errs...)
}
