// Command orchestrator runs mapyard on one host: the public entry point for players,
// the supervisor of every map container, and the only writer of the database.
//
// Usage:
//
//	orchestrator              run, configured by ORCH_* environment variables
//	orchestrator healthcheck  exit 0 if the local orchestrator answers /healthz
//	orchestrator edge ...     run the edge instead (see package edge), so that one image
//	                          ships both processes
//	orchestrator conform --image IMAGE
//	                          check a map image against the map contract (package
//	                          conform), printing one line per check
//	orchestrator admin [METHOD] PATH [BODY]
//	                          call the admin API of the orchestrator beside it (same
//	                          container or host) with its root secret, read as it reads
//	                          it; the answer to stdout, an error answer's JSON to stderr
//	                          (exit 1); BODY - reads stdin. For operators where the
//	                          control listener is unreachable from outside (Swarm):
//	                          docker exec <orchestrator> /orchestrator admin /admin/maps
//	orchestrator -h           list every variable with its default
//
// Fault injection is for tests only and off by default: with
// ORCH_ALLOW_FAULT_INJECTION=1 the admin create route accepts MAP_FAULT_* variables
// for one instance's container (see the map server's -h).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/client"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mapyard/mapyard/mapserver/kernel/envconf"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/ratelimit"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/admission"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/edge"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
	"github.com/mapyard/mapyard/orchestrator/supervise"
	"github.com/mapyard/mapyard/orchestrator/swarm"
	"github.com/mapyard/mapyard/orchestrator/ticket"
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

func run(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "edge" {
		return edge.Run(args[1:], environ, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "conform" {
		return runConform(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "admin" {
		return runAdmin(args[1:], environ, os.Stdin, stdout, stderr)
	}
	var cfg orchestrator.Config
	cmd := envconf.Command{
		Name:  "orchestrator",
		Title: "mapyard orchestrator " + orchestrator.Version,
		Note: "Fault injection (tests only, off by default): with ORCH_ALLOW_FAULT_INJECTION=1,\n" +
			"POST /admin/maps accepts \"env\": [\"MAP_FAULT_EXIT_AFTER_MS=N\" | \"MAP_FAULT_FAIL_HEALTH=true\" |\n" +
			"\"MAP_FAULT_IGNORE_SIGTERM=true\" | \"MAP_FAULT_PANIC_AT_TICK=N\" | \"MAP_FAULT_HANDOFF_DELAY_MS=N\" |\n" +
			"\"MAP_FAULT_ALLOCATE_ON_SIGUSR1=true\"]\n" +
			"for that instance's container; no other variable is ever accepted. PUT /admin/faults\n" +
			"{\"controlDelayMs\": N} delays every map's and the edge's call on the control listener.\n\n" +
			"orchestrator conform --image IMAGE checks a map image against the map contract (-h for its flags).\n" +
			"orchestrator admin [METHOD] PATH [BODY] calls this orchestrator's admin API with its root secret (-h for more).",
		Healthcheck: func() error { return edge.Healthcheck(cfg.PublicAddr) },
	}
	if code, done := cmd.Prepare(&cfg, args, environ, stdout, stderr); done {
		return code
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	m := NewMain(cfg, envconf.NewLogger(stderr, cfg.LogLevel), environ)
	if err := m.Run(ctx); err != nil {
		m.Log.Error("start failed", "err", err)
		m.Close()
		return 1
	}
	<-ctx.Done()
	m.Log.Info("shutting down; map containers keep running")
	if err := m.Close(); err != nil {
		m.Log.Error("shutdown", "err", err)
		return 1
	}
	return 0
}

// Main is the whole orchestrator process, reusable by end-to-end tests.
type Main struct {
	Config  orchestrator.Config
	Log     *slog.Logger
	Environ []string // MAP_* variables are passed on to map containers

	DB         *sqlite.DB
	Docker     *client.Client
	Supervisor *supervise.Supervisor
	Admission  *admission.Service
	HTTP       *httpapi.Server
	Registry   *prometheus.Registry
}

// NewMain returns a Main for cfg.
func NewMain(cfg orchestrator.Config, log *slog.Logger, environ []string) *Main {
	return &Main{Config: cfg, Log: log, Environ: environ}
}

// Run opens the database, connects to Docker, starts both listeners and the map
// supervisor, which adopts the map containers still running from an earlier
// orchestrator and starts wanted maps that have none. It returns once the listeners
// serve and adoption is done.
func (m *Main) Run(ctx context.Context) (err error) {
	cfg := m.Config
	dir := cfg.DataDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	// The stored secret (or ORCH_INTERNAL_RPC_SECRET) is the root: every key and
	// credential is derived from it, and it never leaves this process.
	var templates *mapgen.Templates // the kit's alone unless the host has its own
	if cfg.MapTemplateDir != "" {
		if templates, err = mapgen.LoadTemplates(cfg.MapTemplateDir); err != nil {
			return fmt.Errorf("ORCH_MAP_TEMPLATE_DIR: %w", err)
		}
		m.Log.Info("map templates of the host", "dir", cfg.MapTemplateDir, "maps", templates.Host())
	}
	secret, err := cfg.LoadOrCreateRootSecret()
	if err != nil {
		return err
	}
	root, err := keys.NewRoot(secret)
	if err != nil {
		return err
	}
	if cfg.EdgeCredentialFile != "" {
		if err := orchestrator.WriteFileAtomic(cfg.EdgeCredentialFile, []byte(root.EdgeCredential()+"\n")); err != nil {
			return fmt.Errorf("edge credential: %w", err)
		}
	}
	if err := orchestrator.WriteCredentialFile(dir, orchestrator.MetricsCredentialFileName, root.MetricsCredential()); err != nil {
		return err
	}
	m.Registry = prometheus.NewRegistry()
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.DB = sqlite.NewDB(cfg.DBPath)
	m.DB.CheckpointInterval = envconf.Ms(cfg.CheckpointMS)
	m.DB.Logger = m.Log
	m.DB.SaveAuditKeep = cfg.SaveAuditKeep
	m.DB.Metrics = sqlite.NewMetrics(m.Registry)
	if err := m.DB.Open(); err != nil {
		return err
	}
	m.Registry.MustRegister(m.DB.Collector())

	if m.Docker, err = client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation()); err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := m.Docker.Ping(pingCtx); err != nil {
		return fmt.Errorf("docker engine: %w", err)
	}
	rt, gateway, err := m.runtime(ctx)
	if err != nil {
		return err
	}
	m.Supervisor = supervise.New(rt, mapcontract.NewMapClient(2*time.Second), root, m.Log, supervisorOptions(&cfg, templates))
	m.Supervisor.Store = m.DB
	m.Supervisor.Metrics = supervise.NewMetrics(m.Registry)
	m.Admission = admission.NewService(root, m.DB, m.Supervisor, cfg.DefaultInstanceID, m.Log)
	m.Admission.DefaultMapID = cfg.DefaultMapID
	m.Admission.Templates = templates
	m.Admission.JoinTTL = envconf.Ms(cfg.JoinTicketTTLMS)
	m.Admission.TransferTTL = envconf.Ms(cfg.TransferTokenTTLMS)
	m.Admission.MaxGuests = cfg.MaxGuests
	m.Admission.MaxCharactersPerKey = cfg.MaxCharactersPerKey
	m.Admission.SessionIdle = envconf.Ms(cfg.SessionIdleMS)
	m.Admission.Metrics = admission.NewMetrics(m.Registry)
	if m.Admission.PreviousKeys, err = previousKeys(cfg.PreviousSecret, dir); err != nil {
		return err
	}

	m.HTTP = httpapi.NewServer(m.Supervisor, m.Admission, m.DB, root, m.Log)
	m.HTTP.Callers = m.Supervisor
	m.HTTP.Templates = templates
	m.HTTP.Limits = publicLimits(&cfg)
	registerDoorMetrics(m.Registry, m.HTTP.Limits, m.Admission)
	m.HTTP.PublicAddr, m.HTTP.ControlAddr = cfg.PublicAddr, cfg.ControlAddr
	m.HTTP.ControlExtraIPs = []string{gateway}
	m.HTTP.EdgeOnExtraIPs = cfg.Runtime == "swarm" // the edge is on the maps' overlay too
	m.HTTP.Metrics = promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	m.HTTP.MapTargets = m.Supervisor
	if cfg.AllowFaultInjection {
		m.HTTP.EnableFaults()
	}
	if err := m.HTTP.Open(); err != nil {
		return err
	}
	orchHost := docker.OrchestratorHost
	if cfg.Runtime == "swarm" {
		orchHost = cfg.SwarmSelf
	}
	m.Supervisor.Env = mapEnv(m.Environ, fmt.Sprintf("http://%s:%d", orchHost, m.HTTP.ControlPort()))
	m.Log.Info("orchestrator listening", "version", orchestrator.Version,
		"public", m.HTTP.PublicURL(), "control", m.HTTP.ControlURL(), "mapGateway", gateway, "db", cfg.DBPath,
		"deployment", cfg.Deployment)
	if err := m.Supervisor.Open(ctx); err != nil {
		return err
	}
	return m.Admission.Open()
}

// runtime returns the runtime of ORCH_RUNTIME and the address through which maps reach
// the control listener: the map network's gateway on one engine, the orchestrator's
// own address on the maps' overlay network on Swarm.
func (m *Main) runtime(ctx context.Context) (supervise.Runtime, string, error) {
	cfg := &m.Config
	nanoCPUs, _ := cfg.MapNanoCPUs() // validated by Config.Validate
	if cfg.Runtime == "swarm" {
		nw, err := swarm.EnsureNetwork(ctx, m.Docker, cfg.SwarmNetwork)
		if err != nil {
			return nil, "", fmt.Errorf("ORCH_RUNTIME=swarm: %w", err)
		}
		imageConstraints, _ := cfg.ImageConstraints() // validated by Config.Validate
		self, err := swarm.SelfAddress(nw, cfg.SwarmNetwork)
		if err != nil {
			return nil, "", fmt.Errorf("ORCH_RUNTIME=swarm: %w", err)
		}
		return swarm.NewRuntime(m.Docker, swarm.Template{
			Deployment:       cfg.Deployment,
			Network:          cfg.SwarmNetwork,
			MemoryMB:         cfg.MapMemoryMB,
			NanoCPUs:         nanoCPUs,
			PidsLimit:        int64(cfg.MapPidsLimit),
			Constraints:      cfg.SwarmConstraints,
			ImageConstraints: imageConstraints,
			Reach:            true, // SelfAddress found it on the overlay
			StopGrace:        envconf.Ms(cfg.MapStopGraceMS),
		}), self, nil
	}
	mapNet, err := docker.EnsureNetwork(ctx, m.Docker, cfg.MapNetwork, cfg.Deployment)
	if err != nil {
		return nil, "", err
	}
	if !mapNet.Isolated {
		m.Log.Error("the map network lets maps reach each other: it was created by an older version and containers of another deployment still use it; stop them and restart, or set ORCH_MAP_NETWORK to a new name",
			"network", cfg.MapNetwork)
	}
	isolated := prometheus.NewGauge(prometheus.GaugeOpts{Name: "mapyard_map_network_isolated",
		Help: "1 when the map network was created with inter-container communication off (the engine must also manage iptables to enforce it), 0 when an older network could not be replaced"})
	if mapNet.Isolated {
		isolated.Set(1)
	}
	m.Registry.MustRegister(isolated)
	return docker.NewRuntime(m.Docker, docker.Template{
		Network:    cfg.MapNetwork,
		Gateway:    mapNet.Gateway,
		Deployment: cfg.Deployment,
		MemoryMB:   cfg.MapMemoryMB,
		NanoCPUs:   nanoCPUs,
		PidsLimit:  int64(cfg.MapPidsLimit),
	}), mapNet.Gateway, nil
}

// Close stops the listeners and closes the database. Map containers are left running on
// purpose: players stay connected to them and the next orchestrator adopts them.
func (m *Main) Close() error {
	var errs []error
	if m.Admission != nil {
		errs = append(errs, m.Admission.Close())
	}
	// Listeners first: no request may reach the supervisor once it is closing.
	if m.HTTP != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs = append(errs, m.HTTP.Close(ctx))
		cancel()
	}
	if m.Supervisor != nil {
		errs = append(errs, m.Supervisor.Close())
	}
	if m.DB != nil {
		errs = append(errs, m.DB.Close())
	}
	if m.Docker != nil {
		errs = append(errs, m.Docker.Close())
	}
	return errors.Join(errs...)
}

// supervisorOptions maps the orchestrator's environment onto the supervisor's policies.
func supervisorOptions(cfg *orchestrator.Config, templates *mapgen.Templates) supervise.Options {
	o := supervise.DefaultOptions()
	o.DefaultInstanceID, o.DefaultMapID = cfg.DefaultInstanceID, cfg.DefaultMapID
	o.Image, o.Images = cfg.MapImage, cfg.AllowedMapImages()
	o.Templates = templates
	// The default map runs the image its template names, like any map a portal opens.
	if t, err := templates.Template(cfg.DefaultMapID); err == nil {
		o.DefaultMapImage = t.Image
	}
	o.Policy = supervise.RestartPolicy{
		Window:     envconf.Ms(cfg.MapRestartWindowMS),
		Max:        cfg.MapRestartMaxInWindow,
		Quarantine: envconf.Ms(cfg.MapQuarantineMS),
	}
	o.HeartbeatTimeout = envconf.Ms(cfg.HeartbeatTimeoutMS)
	o.ProbeInterval = envconf.Ms(cfg.MapProbeMS)
	o.StartTimeout = envconf.Ms(cfg.MapStartTimeoutMS)
	o.StopGrace = envconf.Ms(cfg.MapStopGraceMS)
	o.OrphanGrace = envconf.Ms(cfg.MapOrphanGraceMS)
	o.IdleStop = envconf.Ms(cfg.MapIdleStopMS)
	o.Rehome = envconf.Ms(cfg.MapRehomeMS)
	o.PoolSize = cfg.WarmPoolSize
	o.AllowFaultEnv = cfg.AllowFaultInjection
	return o
}

// mapEnv is the environment of map containers: every MAP_* variable of the
// orchestrator's own environment (so hosts tune maps in one place), then how to reach
// the orchestrator, which always wins. Variables the supervisor sets per container
// (identity, credentials, blank pool mode) and fault injection (per instance, tests
// only) are never passed through; nor is the pre-credentials secret variable.
func mapEnv(environ []string, orchURL string) []string {
	var env []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case !strings.HasPrefix(k, mapcontract.EnvPrefix), strings.HasPrefix(k, mapcontract.EnvFaultPrefix):
			continue
		case k == mapcontract.EnvOrchURL, k == mapcontract.EnvLegacySecret, k == mapcontract.EnvCredential, k == mapcontract.EnvOrchCredential,
			k == mapcontract.EnvInstanceID, k == mapcontract.EnvMapID, k == mapcontract.EnvPoolID:
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		mapcontract.EnvOrchURL+"="+orchURL,
		fmt.Sprintf("%s=%d", mapcontract.EnvGamePort, docker.MapGamePort),
		fmt.Sprintf("%s=%d", mapcontract.EnvControlPort, docker.MapControlPort),
	)
}

// previousKeys hashes authKeys as the root before the last rotation did, from secret or
// else the .previous file in dir; nil when there was no rotation.
func previousKeys(secret, dir string) (*ticket.KeyHasher, error) {
	if secret == "" {
		var err error
		if secret, err = orchestrator.LoadPreviousSecret(dir); err != nil || secret == "" {
			return nil, err
		}
	}
	root, err := keys.NewRoot(secret)
	if err != nil {
		return nil, fmt.Errorf("previous root secret: %w", err)
	}
	return ticket.NewKeyHasher(root.AuthKeyHashKey()), nil
}

// publicLimits are the per-client-address limits of joins on the public listener.
func publicLimits(cfg *orchestrator.Config) httpapi.PublicLimits {
	l := ratelimit.New(cfg.JoinRatePerMin, cfg.JoinRateBurst)
	l.MaxClients = cfg.RateLimitClients
	return httpapi.PublicLimits{Join: l, Clients: ratelimit.ClientAddr{TrustedProxies: cfg.TrustedProxies}}
}

// registerDoorMetrics exposes what the public door's limits hold back: requests refused
// per route, addresses tracked, and guest characters held in memory.
func registerDoorMetrics(reg prometheus.Registerer, limits httpapi.PublicLimits, adm *admission.Service) {
	for route, l := range map[string]*ratelimit.Limiter{"join": limits.Join} {
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mapyard_rate_limited_total",
				Help: "requests refused with 429 rate_limited", ConstLabels: prometheus.Labels{"route": route}},
				func() float64 { return float64(l.Refused()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mapyard_rate_limit_clients",
				Help: "client addresses a rate limit tracks now", ConstLabels: prometheus.Labels{"route": route}},
				func() float64 { return float64(l.Len()) }))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mapyard_guest_characters",
		Help: "disposable guest characters held in memory (bounded by ORCH_MAX_GUESTS)"},
		func() float64 { return float64(adm.Guests()) }))
}
