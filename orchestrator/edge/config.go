package edge

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/mapyard/mapyard/mapserver/kernel/ratelimit"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// Config is every tunable of the edge, read from the environment (see envconf.Load).
type Config struct {
	PublicAddr     string `env:"EDGE_PUBLIC_ADDR" envDefault:":8080" help:"public listener: page, join and character API (forwarded to the orchestrator), map WebSockets"`
	MetricsAddr    string `env:"EDGE_METRICS_ADDR" envDefault:"127.0.0.1:9101" help:"loopback listener of /metrics and /healthz"`
	OrchURL        string `env:"EDGE_ORCH_URL" envDefault:"http://127.0.0.1:9000" help:"the orchestrator's control listener"`
	Credential     string `env:"EDGE_CREDENTIAL" help:"the edge's credential on the control listener (opens the route table and join forwarding only); read from EDGE_CREDENTIAL_FILE when empty. The root secret works too, for an edge run by hand"`
	CredentialFile string `env:"EDGE_CREDENTIAL_FILE" envDefault:"/edge/edge-credential" help:"file the orchestrator writes the edge's credential to (ORCH_EDGE_CREDENTIAL_FILE), read again until it exists; never the root secret's file"`

	MaxConns         int    `env:"EDGE_MAX_CONNS" envDefault:"10000" help:"player WebSockets forwarded at once; more are refused with unavailable"`
	IdleTimeoutMS    int    `env:"EDGE_IDLE_TIMEOUT_MS" envDefault:"120000" help:"a WebSocket with no byte either way for this long is closed (the map's own idle rule normally acts first)"`
	WriteTimeoutMS   int    `env:"EDGE_WRITE_TIMEOUT_MS" envDefault:"10000" help:"a peer that does not take a write for this long is cut"`
	DrainTimeoutMS   int    `env:"EDGE_DRAIN_TIMEOUT_MS" envDefault:"10000" help:"on SIGTERM, how long open WebSockets may go on before they are closed"`
	HandoverSocket   string `env:"EDGE_HANDOVER_SOCKET" help:"unix socket (a path in a directory the edge may write) where a starting edge takes the listeners of the edge it replaces, with no connection refused, and answers the edge that will replace it; empty: none, a new edge binds its ports itself (while the old one holds them, it cannot). The image sets /handover/edge.sock, a volume the edge containers share"`
	HandoverSpreadMS int    `env:"EDGE_HANDOVER_SPREAD_MS" envDefault:"1000" help:"once a new edge took over, the old one closes its players' WebSockets evenly over this long (each resumes through the new edge at once), so that their resumes do not all arrive together"`
	Procs            int    `env:"EDGE_PROCS" envDefault:"2" help:"threads running the edge's Go code at once (GOMAXPROCS); with 2 or more the epoll engine waits in epoll_wait on a thread of its own (one wait per wake-up instead of two) and the rest of the edge runs on the other; 1 parks the epoll engine in Go's poller instead"`
	Engine           string `env:"EDGE_ENGINE" envDefault:"epoll" help:"how WebSocket bytes are copied after the upgrade: epoll (one goroutine copies for every connection, waiting on one epoll set; Linux) or goroutine (two goroutines per connection; the fallback elsewhere). loop, the epoll engine's former name, is still read as epoll, with a warning at start"`
	MapDial          string `env:"EDGE_MAP_DIAL" envDefault:"network" help:"how the edge reaches a map: network (the map container's own address on the map network, falling back to loopback for good if that cannot be dialled, e.g. under rootless Docker), loopback (the game port published on 127.0.0.1, through Docker's userland proxy) or overlay (ORCH_RUNTIME=swarm: the map's address on the maps' overlay network only; the edge runs on that network, see compose/stack.yaml)"`
	MapLink          string `env:"EDGE_MAP_LINK" envDefault:"on" help:"on: the players forwarded to a map share one connection to it (a link; with the epoll engine, and maps that serve one: others get a connection per player); off: a connection per player"`
	LinkBatchMS      int    `env:"EDGE_LINK_BATCH_MS" envDefault:"1" help:"while players' messages to and from maps arrive faster than this, the epoll engine handles them once per this many ms, so that one wake-up and one write to a link carry many players' messages (the cost a host pays per message); 0 handles every wake-up at once"`
	LogLevel         string `env:"EDGE_LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`

	JoinRatePerMin     int            `env:"EDGE_JOIN_RATE_PER_MIN" envDefault:"30" help:"joins a minute allowed from one client address (IPv6: one /64); more get 429 rate_limited; 0 = no limit"`
	JoinRateBurst      int            `env:"EDGE_JOIN_RATE_BURST" envDefault:"10" help:"joins one client address may make at once"`
	APIRatePerMin      int            `env:"EDGE_API_RATE_PER_MIN" envDefault:"120" help:"character API calls a minute allowed from one client address; more get 429 rate_limited; 0 = no limit"`
	APIRateBurst       int            `env:"EDGE_API_RATE_BURST" envDefault:"30" help:"character API calls one client address may make at once"`
	WSRatePerMin       int            `env:"EDGE_WS_RATE_PER_MIN" envDefault:"60" help:"map WebSocket upgrades a minute allowed from one client address; more get 429 rate_limited; 0 = no limit"`
	WSRateBurst        int            `env:"EDGE_WS_RATE_BURST" envDefault:"20" help:"map WebSocket upgrades one client address may make at once"`
	RateLimitClients   int            `env:"EDGE_RATE_LIMIT_CLIENTS" envDefault:"65536" help:"client addresses each rate limit tracks; past it the least recently seen is forgotten"`
	TrustedProxies     []netip.Prefix `env:"EDGE_TRUSTED_PROXIES" envSeparator:"," help:"comma-separated CIDRs without spaces (e.g. 127.0.0.1/32) of reverse proxies whose EDGE_TRUSTED_PROXY_HEADER names the client (for the rate limits, and passed on to maps and the orchestrator); empty = the TCP peer is the client"`
	TrustedProxyHeader string         `env:"EDGE_TRUSTED_PROXY_HEADER" envDefault:"X-Forwarded-For" help:"the header the trusted proxies write the client's address in: X-Forwarded-For, or Forwarded (RFC 7239, its for= parameters); only that one is read, since a proxy passes the other on as the client sent it"`

	TLSCertFile           string   `env:"EDGE_TLS_CERT_FILE" help:"HTTPS on EDGE_PUBLIC_ADDR with this PEM certificate chain (and EDGE_TLS_KEY_FILE), read again when either file changes, no restart; empty, and EDGE_ACME_DOMAINS empty: plain HTTP"`
	TLSKeyFile            string   `env:"EDGE_TLS_KEY_FILE" help:"the PEM private key of EDGE_TLS_CERT_FILE"`
	TLSReloadMS           int      `env:"EDGE_TLS_RELOAD_MS" envDefault:"10000" help:"how often the certificate files are looked at; a changed pair that does not load (unreadable, key and certificate apart, expired) is refused with an error in the log and mapyard_edge_tls_cert_reloads_total{result=\"refused\"}, and the previous one keeps serving"`
	ACMEDomains           []string `env:"EDGE_ACME_DOMAINS" envSeparator:"," help:"comma-separated host names to get certificates for from an ACME CA (HTTPS on EDGE_PUBLIC_ADDR): the CA must reach this edge at each name on port 443 (TLS-ALPN-01) or on port 80 (HTTP-01, with EDGE_HTTP_ADDR=:80); other names are refused"`
	ACMEEmail             string   `env:"EDGE_ACME_EMAIL" help:"contact address the ACME CA is given for the account (expiry and policy notices); optional"`
	ACMEDirectory         string   `env:"EDGE_ACME_DIRECTORY" envDefault:"https://acme-v02.api.letsencrypt.org/directory" help:"the ACME CA's directory URL (Let's Encrypt; its staging CA: https://acme-staging-v02.api.letsencrypt.org/directory)"`
	ACMECacheDir          string   `env:"EDGE_ACME_CACHE_DIR" help:"directory keeping the ACME account key and the certificates across restarts and edge replacements; required with EDGE_ACME_DOMAINS (the image sets /certs, a volume of the edge's own)"`
	HTTPAddr              string   `env:"EDGE_HTTP_ADDR" help:"with HTTPS on: a plain HTTP listener (e.g. :80) that answers ACME HTTP-01 challenges and redirects every other request to HTTPS (308, same host and path); empty: none"`
	HSTSMaxAgeS           int      `env:"EDGE_HSTS_MAX_AGE_S" envDefault:"31536000" help:"with HTTPS on: the max-age, in seconds, of the Strict-Transport-Security header of every HTTPS answer (browsers then use HTTPS alone for that long); 0: no header"`
	TLSHandshakeTimeoutMS int      `env:"EDGE_TLS_HANDSHAKE_TIMEOUT_MS" envDefault:"10000" help:"with HTTPS on: a client that has not completed its TLS handshake within this long is dropped"`

	AssetDir    string `env:"EDGE_ASSET_DIR" envDefault:"" help:"a host's asset sets (docs/assets.md; the image sets /assets, where compose mounts compose/assets/ read-only): each subdirectory holding a manifest.json is one set, served beside the built-in mapyard-default under content-hashed URLs once verified; looked at again every EDGE_ASSET_POLL_MS, a set that fails verification is refused (logged, counted in mapyard_edge_asset_sets_refused_total) and the version loaded before keeps serving; empty or absent: the built-in set only"`
	AssetPollMS int    `env:"EDGE_ASSET_POLL_MS" envDefault:"3000" help:"how often EDGE_ASSET_DIR is looked at for added, changed or removed sets (0: 3000)"`

	StaticRoutes string `env:"EDGE_STATIC_ROUTES" envDefault:"" help:"BENCHMARKS ONLY: fixed routes instance=port,... used instead of the orchestrator's table"`
}

// Validate checks values that parse but make no sense, naming the variable.
func (c *Config) Validate() error {
	for _, a := range []struct{ name, addr string }{
		{"EDGE_PUBLIC_ADDR", c.PublicAddr}, {"EDGE_METRICS_ADDR", c.MetricsAddr},
	} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			return fmt.Errorf("%s=%q: not host:port: %w", a.name, a.addr, err)
		}
	}
	if u, err := url.Parse(c.OrchURL); err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("EDGE_ORCH_URL=%q: must be an http:// URL", c.OrchURL)
	}
	if c.Credential == "" && c.CredentialFile == "" {
		return fmt.Errorf("EDGE_CREDENTIAL or EDGE_CREDENTIAL_FILE must be set")
	}
	for _, v := range []struct {
		name     string
		val, min int
	}{
		{"EDGE_MAX_CONNS", c.MaxConns, 1},
		{"EDGE_IDLE_TIMEOUT_MS", c.IdleTimeoutMS, 100},
		{"EDGE_WRITE_TIMEOUT_MS", c.WriteTimeoutMS, 100},
		{"EDGE_DRAIN_TIMEOUT_MS", c.DrainTimeoutMS, 0},
		{"EDGE_HANDOVER_SPREAD_MS", c.HandoverSpreadMS, 0},
		{"EDGE_LINK_BATCH_MS", c.LinkBatchMS, 0},
		{"EDGE_PROCS", c.Procs, 1},
		{"EDGE_JOIN_RATE_PER_MIN", c.JoinRatePerMin, 0},
		{"EDGE_JOIN_RATE_BURST", c.JoinRateBurst, 0},
		{"EDGE_API_RATE_PER_MIN", c.APIRatePerMin, 0},
		{"EDGE_API_RATE_BURST", c.APIRateBurst, 0},
		{"EDGE_WS_RATE_PER_MIN", c.WSRatePerMin, 0},
		{"EDGE_WS_RATE_BURST", c.WSRateBurst, 0},
		{"EDGE_RATE_LIMIT_CLIENTS", c.RateLimitClients, 0},
		{"EDGE_ASSET_POLL_MS", c.AssetPollMS, 0},
		{"EDGE_HSTS_MAX_AGE_S", c.HSTSMaxAgeS, 0},
	} {
		if v.val < v.min {
			return fmt.Errorf("%s=%d: must be at least %d", v.name, v.val, v.min)
		}
	}
	switch c.MapDial {
	case "", MapDialNetwork, MapDialLoopback, MapDialOverlay:
	default:
		return fmt.Errorf("EDGE_MAP_DIAL=%q: must be network, loopback or overlay", c.MapDial)
	}
	if c.MapLink != "" && c.MapLink != "on" && c.MapLink != "off" {
		return fmt.Errorf("EDGE_MAP_LINK=%q: must be on or off", c.MapLink)
	}
	if c.Engine != "" && c.Engine != EngineEpoll && c.Engine != EngineGoroutine && c.Engine != engineLoopAlias {
		return fmt.Errorf("EDGE_ENGINE=%q: must be epoll or goroutine", c.Engine)
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("EDGE_LOG_LEVEL=%q: must be debug, info, warn or error", c.LogLevel)
	}
	if _, err := c.ParseStaticRoutes(); err != nil {
		return err
	}
	return nil
}

// TLS says whether the public listener speaks HTTPS: certificates from files or from
// an ACME CA are configured.
func (c *Config) TLS() bool { return c.TLSCertFile != "" || len(c.ACMEDomains) > 0 }

// validateTLS checks the HTTPS settings and the trusted proxies' header.
func (c *Config) validateTLS() error {
	switch {
	case !strings.EqualFold(c.TrustedProxyHeader, ratelimit.HeaderXForwardedFor) &&
		!strings.EqualFold(c.TrustedProxyHeader, ratelimit.HeaderForwarded) && c.TrustedProxyHeader != "":
		return fmt.Errorf("EDGE_TRUSTED_PROXY_HEADER=%q: must be X-Forwarded-For or Forwarded", c.TrustedProxyHeader)
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		return fmt.Errorf("EDGE_TLS_CERT_FILE and EDGE_TLS_KEY_FILE go together: set both or neither")
	case c.TLSCertFile != "" && len(c.ACMEDomains) > 0:
		return fmt.Errorf("EDGE_TLS_CERT_FILE and EDGE_ACME_DOMAINS: set one of them, not both")
	case len(c.ACMEDomains) > 0 && c.ACMECacheDir == "":
		return fmt.Errorf("EDGE_ACME_CACHE_DIR must be set with EDGE_ACME_DOMAINS (where certificates are kept across restarts)")
	case c.HTTPAddr != "" && !c.TLS():
		return fmt.Errorf("EDGE_HTTP_ADDR=%q: the HTTP listener redirects to HTTPS, so it needs EDGE_TLS_CERT_FILE or EDGE_ACME_DOMAINS", c.HTTPAddr)
	}
	if c.TLS() && c.TLSCertFile != "" && c.TLSReloadMS < 100 {
		return fmt.Errorf("EDGE_TLS_RELOAD_MS=%d: must be at least 100", c.TLSReloadMS)
	}
	if c.TLS() && c.TLSHandshakeTimeoutMS < 100 {
		return fmt.Errorf("EDGE_TLS_HANDSHAKE_TIMEOUT_MS=%d: must be at least 100", c.TLSHandshakeTimeoutMS)
	}
	if c.HTTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
			return fmt.Errorf("EDGE_HTTP_ADDR=%q: not host:port: %w", c.HTTPAddr, err)
		}
	}
	for _, d := range c.ACMEDomains {
		if !validHostName(d) {
			return fmt.Errorf("EDGE_ACME_DOMAINS: %q is not a host name with a dot (an ACME CA certifies names, not addresses)", d)
		}
	}
	if len(c.ACMEDomains) > 0 {
		if u, err := url.Parse(c.ACMEDirectory); err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("EDGE_ACME_DIRECTORY=%q: must be an https:// URL", c.ACMEDirectory)
		}
	}
	return nil
}

// validHostName says whether s is a DNS name of two labels or more, not an address.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 || net.ParseIP(s) != nil || !strings.Contains(strings.Trim(s, "."), ".") {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// engineLoopAlias is EDGE_ENGINE's former name for the epoll engine ("loop"), still
// accepted from hosts' existing env files.
const engineLoopAlias = "loop"

// normalise replaces deprecated values by the ones they stand for and returns a
// warning for each, for New to log once at start.
func (c *Config) normalise() []string {
	var warnings []string
	if c.Engine == engineLoopAlias {
		c.Engine = EngineEpoll
		warnings = append(warnings, "EDGE_ENGINE=loop is deprecated: it is the epoll engine, now named EDGE_ENGINE=epoll")
	}
	return warnings
}

// ParseStaticRoutes returns EDGE_STATIC_ROUTES as instance → port, or nil when unset.
func (c *Config) ParseStaticRoutes() (map[string]int, error) {
	if strings.TrimSpace(c.StaticRoutes) == "" {
		return nil, nil
	}
	routes := map[string]int{}
	for _, kv := range strings.Split(c.StaticRoutes, ",") {
		id, p, ok := strings.Cut(strings.TrimSpace(kv), "=")
		port, err := strconv.Atoi(p)
		if !ok || err != nil || port < 1 || port > 65535 || !record.ValidName(id) {
			return nil, fmt.Errorf("EDGE_STATIC_ROUTES: %q is not instance=port", kv)
		}
		routes[id] = port
	}
	return routes, nil
}
