package orchestrator

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// Version and Commit identify the build; `make build` stamps them with -ldflags.
var (
	Version = "dev"
	Commit  = "none"
)

// RPCConfig is the part of Config that every process serving the orchestrator's side
// of the control RPC reads: the orchestrator, and bin/fakeorch, which serves it to a
// map developer without Docker. Both embed it, so a variable has one name, one rule
// (Validate) and one meaning wherever it is read; fakeorch presets its own defaults
// (envconf.Load).
type RPCConfig struct {
	PublicAddr         string `env:"ORCH_PUBLIC_ADDR" envDefault:"127.0.0.1:8081" help:"the orchestrator's own HTTP listener: /healthz, /readyz and the join API (players come through the edge on :8080, which forwards joins to the control listener)"`
	ControlAddr        string `env:"ORCH_CONTROL_ADDR" envDefault:"127.0.0.1:9000" help:"control RPC and admin listener (loopback; also bound on the map network gateway)"`
	Secret             string `env:"ORCH_INTERNAL_RPC_SECRET" help:"root secret every key and credential is derived from (never given to maps); generated on first start and kept in the data dir when empty"`
	DefaultInstanceID  string `env:"ORCH_DEFAULT_INSTANCE_ID" envDefault:"default-1" help:"instance id of the default map (container mapyard-map-<id>, with .<deployment> after it outside the default deployment)"`
	TransferTokenTTLMS int    `env:"ORCH_TRANSFER_TOKEN_TTL_MS" envDefault:"10000" help:"lifetime of a transfer token"`
	JoinTicketTTLMS    int    `env:"ORCH_JOIN_TICKET_TTL_MS" envDefault:"10000" help:"lifetime of a join ticket"`
	LogLevel           string `env:"ORCH_LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`
}

// Validate checks the values of RPCConfig that parse but make no sense, naming the
// variable.
func (c *RPCConfig) Validate() error {
	for _, a := range []struct{ name, addr string }{
		{"ORCH_PUBLIC_ADDR", c.PublicAddr}, {"ORCH_CONTROL_ADDR", c.ControlAddr},
	} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			return fmt.Errorf("%s=%q: not host:port: %w", a.name, a.addr, err)
		}
	}
	// The control listener must never face the outside: it drives every map.
	if host, _, _ := net.SplitHostPort(c.ControlAddr); host != "localhost" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("ORCH_CONTROL_ADDR=%q: must be a loopback address (maps reach it through the map network gateway)", c.ControlAddr)
		}
	}
	if c.Secret != "" && len(c.Secret) < 16 {
		return fmt.Errorf("ORCH_INTERNAL_RPC_SECRET: must be at least 16 characters")
	}
	if !record.ValidName(c.DefaultInstanceID) {
		return fmt.Errorf("ORCH_DEFAULT_INSTANCE_ID=%q: must be %s", c.DefaultInstanceID, record.IDRule)
	}
	for _, v := range []struct {
		name string
		val  int
	}{{"ORCH_TRANSFER_TOKEN_TTL_MS", c.TransferTokenTTLMS}, {"ORCH_JOIN_TICKET_TTL_MS", c.JoinTicketTTLMS}} {
		if v.val < 100 {
			return fmt.Errorf("%s=%d: must be at least 100", v.name, v.val)
		}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("ORCH_LOG_LEVEL=%q: must be debug, info, warn or error", c.LogLevel)
	}
	return nil
}

// Config is every tunable of the orchestrator, read from the environment (see
// envconf.Load). Durations are whole milliseconds, as in the variable names.
type Config struct {
	RPCConfig
	DBPath string `env:"ORCH_DB_PATH" envDefault:"/data/mapyard.db" help:"SQLite database file; the generated secret is kept beside it"`
	// EdgeCredentialFile is where the edge, which must not read the root, finds its
	// own credential.
	EdgeCredentialFile string `env:"ORCH_EDGE_CREDENTIAL_FILE" envDefault:"" help:"file the orchestrator writes the edge's credential to at every start (derived from the root; opens only the route-table watch and join forwarding), in a directory the edge mounts instead of the data dir; empty = not written"`
	// PreviousSecret is the root before the last rotation (see docs/security.md).
	PreviousSecret string `env:"ORCH_PREVIOUS_INTERNAL_RPC_SECRET" help:"root secret before the last rotation, so saved characters are found by their players' authKeys (also read from internal-rpc-secret.previous in the data dir)"`

	CheckpointMS          int `env:"ORCH_CHECKPOINT_MS" envDefault:"300000" help:"interval between snapshot checkpoints to the database"`
	HeartbeatTimeoutMS    int `env:"ORCH_HEARTBEAT_TIMEOUT_MS" envDefault:"15000" help:"a map without a heartbeat for this long is unhealthy"`
	MapRestartWindowMS    int `env:"ORCH_MAP_RESTART_WINDOW_MS" envDefault:"60000" help:"window in which map restarts are counted"`
	MapRestartMaxInWindow int `env:"ORCH_MAP_RESTART_MAX_IN_WINDOW" envDefault:"3" help:"restarts allowed per window before a map is quarantined"`
	MapQuarantineMS       int `env:"ORCH_MAP_QUARANTINE_MS" envDefault:"60000" help:"how long a quarantined map is left alone"`
	WarmPoolSize          int `env:"ORCH_WARM_POOL_SIZE" envDefault:"1" help:"blank map containers kept started and registered per image: of ORCH_MAP_IMAGE always, of another allowed image once a map of it has started"`
	MapIdleStopMS         int `env:"ORCH_MAP_IDLE_STOP_MS" envDefault:"600000" help:"non-default maps with no players are stopped after this long"`
	MapRehomeMS           int `env:"ORCH_MAP_REHOME_MS" envDefault:"30000" help:"a map handed out from the warm pool is moved to a container created for it (named and labelled with its instance) once it has had no players this long; 0 = never"`

	MapImage       string   `env:"ORCH_MAP_IMAGE" envDefault:"mapyard/map:latest" help:"image of maps whose template or admin create names none; always allowed"`
	MapTemplateDir string   `env:"ORCH_MAP_TEMPLATE_DIR" help:"a directory of the host's map templates, read at start: each <mapId>.json a whole MapConfig (docs/mapgen.md), adding a map (a portal's target, an admin create without a config) or replacing one of the kit's (default.json changes the default map); empty: the kit's own"`
	MapImages      []string `env:"ORCH_MAP_IMAGES" envDefault:"mapyard/map:latest,mapyard/tag:latest" envSeparator:"," help:"comma-separated images a map template or admin create may name (compared as written; ORCH_MAP_IMAGE is allowed too); any other is refused with 400 image_not_allowed"`

	Runtime               string   `env:"ORCH_RUNTIME" envDefault:"docker" help:"what runs maps: docker (containers on this engine) or swarm (a one-replica Swarm service each; the engine must be a Swarm manager; see docs/scale-out.md)"`
	SwarmNetwork          string   `env:"ORCH_SWARM_NETWORK" envDefault:"mapyard-maps" help:"with ORCH_RUNTIME=swarm: attachable overlay network of map services (created if missing)"`
	SwarmSelf             string   `env:"ORCH_SWARM_SELF" envDefault:"mapyard_orchestrator" help:"with ORCH_RUNTIME=swarm: the orchestrator's DNS name on the maps' overlay network, which maps dial for the control RPC (its service name in compose/stack.yaml)"`
	SwarmImageConstraints []string `env:"ORCH_SWARM_IMAGE_CONSTRAINTS" envSeparator:";" help:"with ORCH_RUNTIME=swarm: more constraints for the maps of one image (so of its templates), as IMAGE=>constraint[,constraint] entries separated by ';' (e.g. studio/arena:2=>node.labels.arena==true); the image as the template names it"`
	SwarmConstraints      []string `env:"ORCH_SWARM_CONSTRAINTS" envSeparator:"," help:"with ORCH_RUNTIME=swarm: comma-separated Swarm placement constraints of every map service (e.g. node.labels.mapyard.maps==true); empty = any node"`

	MapNetwork     string `env:"ORCH_MAP_NETWORK" envDefault:"mapyard" help:"user-defined bridge network of map containers"`
	MapMemoryMB    int    `env:"ORCH_MAP_MEMORY_MB" envDefault:"512" help:"memory limit of each map container"`
	MapCPUs        string `env:"ORCH_MAP_CPUS" envDefault:"1" help:"CPU limit of each map container, in cores (e.g. 0.5)"`
	MapPidsLimit   int    `env:"ORCH_MAP_PIDS_LIMIT" envDefault:"256" help:"process/thread limit of each map container"`
	MapStopGraceMS int    `env:"ORCH_MAP_STOP_GRACE_MS" envDefault:"10000" help:"time a stopping map gets to flush before it is killed"`
	DefaultMapID   string `env:"ORCH_DEFAULT_MAP_ID" envDefault:"default" help:"map that new characters join"`

	Deployment        string         `env:"ORCH_DEPLOYMENT" envDefault:"mapyard" help:"name of this deployment: the orchestrator lists, adopts, stops and removes only map containers labelled with it; other deployments name their containers mapyard-map-<id>.<deployment>"`
	MapProbeMS        int            `env:"ORCH_MAP_PROBE_MS" envDefault:"2000" help:"interval between HTTP probes of each map's /health"`
	MapStartTimeoutMS int            `env:"ORCH_MAP_START_TIMEOUT_MS" envDefault:"30000" help:"a map that does not become ready this long after its start is unhealthy; also bounds how long a join waits for a lazily started map"`
	MapOrphanGraceMS  int            `env:"ORCH_MAP_ORPHAN_GRACE_MS" envDefault:"10000" help:"labelled map containers of unknown instances found at start are removed after this long"`
	JoinRatePerMin    int            `env:"ORCH_JOIN_RATE_PER_MIN" envDefault:"30" help:"joins a minute allowed from one client address (IPv6: one /64) on this public listener (the edge has its own EDGE_* limits); 0 = no limit"`
	JoinRateBurst     int            `env:"ORCH_JOIN_RATE_BURST" envDefault:"10" help:"joins one client address may make at once"`
	RateLimitClients  int            `env:"ORCH_RATE_LIMIT_CLIENTS" envDefault:"65536" help:"client addresses each rate limit tracks; past it the least recently seen is forgotten"`
	TrustedProxies    []netip.Prefix `env:"ORCH_TRUSTED_PROXIES" envSeparator:"," help:"comma-separated CIDRs without spaces (e.g. 127.0.0.1/32) of reverse proxies whose X-Forwarded-For names the client; empty = the TCP peer is the client"`
	MaxGuests         int            `env:"ORCH_MAX_GUESTS" envDefault:"10000" help:"disposable guest characters held in memory; past it guest joins get 503 capacity (players with an authKey are not affected); 0 = no bound"`

	MaxCharactersPerKey int `env:"ORCH_MAX_CHARACTERS_PER_KEY" envDefault:"8" help:"characters one identity (authKey) may own; creating more gets 409 character_limit"`
	SessionIdleMS       int `env:"ORCH_SESSION_IDLE_MS" envDefault:"30000" help:"a character held by a map counts as in play (cannot be deleted, shown active in /admin/sessions) until its map has pushed no state of it for this long; keep it above MAP_SNAPSHOT_PUSH_MS"`
	SaveAuditKeep       int `env:"ORCH_SAVE_AUDIT_KEEP" envDefault:"100" help:"save audit rows kept per character: every checkpoint or transfer that changes a character's saved state appends one (schema version, simulation build, hash); older rows are removed"`

	AllowFaultInjection bool `env:"ORCH_ALLOW_FAULT_INJECTION" envDefault:"false" help:"TESTS ONLY: let admin create pass MAP_FAULT_* variables to one instance's container, and PUT /admin/faults delay the calls of maps and of the edge"`
}

// Validate checks values that parse but make no sense, naming the variable.
func (c *Config) Validate() error {
	if err := c.RPCConfig.Validate(); err != nil {
		return err
	}
	if c.DBPath == "" {
		return fmt.Errorf("ORCH_DB_PATH: must not be empty")
	}
	if c.PreviousSecret != "" && len(c.PreviousSecret) < 16 {
		return fmt.Errorf("ORCH_PREVIOUS_INTERNAL_RPC_SECRET: must be at least 16 characters")
	}
	for _, v := range []struct {
		name     string
		val, min int
	}{
		{"ORCH_CHECKPOINT_MS", c.CheckpointMS, 100},
		{"ORCH_HEARTBEAT_TIMEOUT_MS", c.HeartbeatTimeoutMS, 100},
		{"ORCH_MAP_RESTART_WINDOW_MS", c.MapRestartWindowMS, 100},
		{"ORCH_MAP_RESTART_MAX_IN_WINDOW", c.MapRestartMaxInWindow, 0},
		{"ORCH_MAP_QUARANTINE_MS", c.MapQuarantineMS, 0},
		{"ORCH_WARM_POOL_SIZE", c.WarmPoolSize, 0},
		{"ORCH_MAP_IDLE_STOP_MS", c.MapIdleStopMS, 1000},
		{"ORCH_MAP_REHOME_MS", c.MapRehomeMS, 0},
		{"ORCH_MAP_MEMORY_MB", c.MapMemoryMB, 16},
		{"ORCH_MAP_PIDS_LIMIT", c.MapPidsLimit, 16},
		{"ORCH_MAP_STOP_GRACE_MS", c.MapStopGraceMS, 0},
		{"ORCH_MAP_PROBE_MS", c.MapProbeMS, 50},
		{"ORCH_MAP_START_TIMEOUT_MS", c.MapStartTimeoutMS, 100},
		{"ORCH_MAP_ORPHAN_GRACE_MS", c.MapOrphanGraceMS, 0},
		{"ORCH_JOIN_RATE_PER_MIN", c.JoinRatePerMin, 0},
		{"ORCH_JOIN_RATE_BURST", c.JoinRateBurst, 1},
		{"ORCH_RATE_LIMIT_CLIENTS", c.RateLimitClients, 1},
		{"ORCH_MAX_GUESTS", c.MaxGuests, 0},
		{"ORCH_MAX_CHARACTERS_PER_KEY", c.MaxCharactersPerKey, 1},
		{"ORCH_SESSION_IDLE_MS", c.SessionIdleMS, 1000},
		{"ORCH_SAVE_AUDIT_KEEP", c.SaveAuditKeep, 1},
	} {
		if v.val < v.min {
			return fmt.Errorf("%s=%d: must be at least %d", v.name, v.val, v.min)
		}
	}
	if _, err := c.MapNanoCPUs(); err != nil {
		return err
	}
	if !record.ValidName(c.DefaultMapID) {
		return fmt.Errorf("ORCH_DEFAULT_MAP_ID=%q: must be %s", c.DefaultMapID, record.IDRule)
	}
	if !record.ValidName(c.Deployment) {
		return fmt.Errorf("ORCH_DEPLOYMENT=%q: must be %s", c.Deployment, record.IDRule)
	}
	if err := mapgen.ValidateImage("ORCH_MAP_IMAGE", c.MapImage, false); err != nil {
		return err
	}
	for _, img := range c.AllowedMapImages() {
		if err := mapgen.ValidateImage("ORCH_MAP_IMAGES", img, false); err != nil {
			return err
		}
	}
	switch c.Runtime {
	case "docker", "swarm":
	default:
		return fmt.Errorf("ORCH_RUNTIME=%q: must be docker or swarm", c.Runtime)
	}
	if !record.ValidName(c.SwarmNetwork) {
		return fmt.Errorf("ORCH_SWARM_NETWORK=%q: must be %s", c.SwarmNetwork, record.IDRule)
	}
	if !validHostname(c.SwarmSelf) {
		return fmt.Errorf("ORCH_SWARM_SELF=%q: must be a DNS name (letters, digits, '-', '_' and '.')", c.SwarmSelf)
	}
	for _, expr := range c.SwarmConstraints {
		if !isConstraint(expr) {
			return fmt.Errorf("ORCH_SWARM_CONSTRAINTS: %q is not a constraint (attribute==value or attribute!=value)", expr)
		}
	}
	if _, err := c.ImageConstraints(); err != nil {
		return err
	}
	if !record.ValidName(c.MapNetwork) {
		return fmt.Errorf("ORCH_MAP_NETWORK=%q: must be %s", c.MapNetwork, record.IDRule)
	}
	return nil
}

// AllowedMapImages returns ORCH_MAP_IMAGES without blanks around or between its
// entries, so "a, b," means a and b.
func (c *Config) AllowedMapImages() []string {
	var out []string
	for _, img := range c.MapImages {
		if img = strings.TrimSpace(img); img != "" {
			out = append(out, img)
		}
	}
	return out
}

// MapNanoCPUs returns ORCH_MAP_CPUS in the Docker API's unit (1e-9 CPUs).
func (c *Config) MapNanoCPUs() (int64, error) {
	var cpus float64
	if _, err := fmt.Sscanf(c.MapCPUs, "%g", &cpus); err != nil || cpus < 0.01 || cpus > 1024 {
		return 0, fmt.Errorf("ORCH_MAP_CPUS=%q: must be a number of cores between 0.01 and 1024", c.MapCPUs)
	}
	return int64(cpus * 1e9), nil
}

// validHostname reports whether s can name a host in a URL: DNS labels of letters,
// digits, '-' and '_' (Swarm's service names have underscores), joined by dots.
func validHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// ImageConstraints returns ORCH_SWARM_IMAGE_CONSTRAINTS by image.
func (c *Config) ImageConstraints() (map[string][]string, error) {
	out := map[string][]string{}
	for _, entry := range c.SwarmImageConstraints {
		if strings.TrimSpace(entry) == "" {
			continue
		}
		image, list, ok := strings.Cut(entry, "=>")
		image = strings.TrimSpace(image)
		if !ok || image == "" {
			return nil, fmt.Errorf("ORCH_SWARM_IMAGE_CONSTRAINTS: %q is not IMAGE=>constraint[,constraint]", entry)
		}
		for _, expr := range strings.Split(list, ",") {
			expr = strings.TrimSpace(expr)
			if !isConstraint(expr) {
				return nil, fmt.Errorf("ORCH_SWARM_IMAGE_CONSTRAINTS: %q (image %s) is not a constraint (attribute==value or attribute!=value)", expr, image)
			}
			out[image] = append(out[image], expr)
		}
	}
	return out, nil
}

// isConstraint reports whether expr reads as a Swarm placement constraint.
func isConstraint(expr string) bool {
	a, _, ok := strings.Cut(expr, "==")
	if !ok {
		a, _, ok = strings.Cut(expr, "!=")
	}
	return ok && strings.TrimSpace(a) != ""
}
