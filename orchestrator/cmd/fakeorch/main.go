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

// Config is the fake orchestrator's environment: the orchestrator's names, loopback
// defaults, and a map instance the developer starts by hand.
type Config struct {
	PublicAddr         string `env:"ORCH_PUBLIC_ADDR" envDefault:"127.0.0.1:8080" help:"join API listener"`
	ControlAddr        string `env:"ORCH_CONTROL_ADDR" envDefault:"127.0.0.1:9000" help:"control RPC listener the map server registers with"`
	Secret             string `env:"ORCH_INTERNAL_RPC_SECRET" help:"root secret; a random one is generated when empty (maps never get it: each gets its own printed credentials)"`
	DefaultInstanceID  string `env:"ORCH_DEFAULT_INSTANCE_ID" envDefault:"dev-1" help:"instance that join tickets target (set the same MAP_INSTANCE_ID on the map)"`
	DevInstances       string `env:"ORCH_DEV_INSTANCES" envDefault:"" help:"comma-separated further instance ids to print map credentials for (to run several maps, e.g. for transfers)"`
	JoinTicketTTLMS    int    `env:"ORCH_JOIN_TICKET_TTL_MS" envDefault:"10000" help:"lifetime of a join ticket"`
	TransferTokenTTLMS int    `env:"ORCH_TRANSFER_TOKEN_TTL_MS" envDefault:"10000" help:"lifetime of a transfer token"`
	LogLevel           string `env:"ORCH_LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`
	MapConfigFile      string `env:"ORCH_FAKE_MAP_CONFIG" help:"MapConfig JSON file sent to the map that registers as its instanceId (default: the map's template); benchmarks use it"`
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

// Validate checks the values, naming the variable.
func (c *Config) Validate() error {
	for _, id := range c.devInstances() {
		if !record.ValidName(id) {
			return fmt.Errorf("ORCH_DEV_INSTANCES: %q must be %s", id, record.IDRule)
		}
	}
	if c.Secret != "" && len(c.Secret) < 16 {
		return errors.New("ORCH_INTERNAL_RPC_SECRET: must be at least 16 characters")
	}
	if !record.ValidName(c.DefaultInstanceID) {
		return fmt.Errorf("ORCH_DEFAULT_INSTANCE_ID=%q: must be %s", c.DefaultInstanceID, record.IDRule)
	}
	if c.JoinTicketTTLMS < 100 || c.TransferTokenTTLMS < 100 {
		return errors.New("ORCH_JOIN_TICKET_TTL_MS and ORCH_TRANSFER_TOKEN_TTL_MS: must be at least 100")
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("ORCH_LOG_LEVEL=%q: must be debug, info, warn or error", c.LogLevel)
	}
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

func run(args, environ []string, stdout, stderr io.Writer) int {
	var cfg Config
	cmd := envconf.Command{Name: "fakeorch", Title: "mapyard fake orchestrator " + orchestrator.Version,
		Note: "Listeners are for this machine only; the database is a temporary file removed at exit."}
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
	m.Admission.JoinTTL = orchestrator.Ms(m.Config.JoinTicketTTLMS)
	m.Admission.TransferTTL = orchestrator.Ms(m.Config.TransferTokenTTLMS)
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
