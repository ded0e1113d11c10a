// Package edge is mapyard's public door, run as its own process: it serves the page,
// forwards joins and the character API to the orchestrator, and proxies each player's WebSocket to its map's
// loopback game port. It holds no state but a copy of the orchestrator's route table,
// which it keeps while the orchestrator is away, so an orchestrator crash, restart or
// upgrade never touches a player's established connection.
package edge

import (
	"bytes"
	"context"
	"crypto/tls"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
	"github.com/mapyard/mapyard/mapserver/kernel/envconf"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/ratelimit"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/kernel/routetable"
)

//go:embed static
var embedded embed.FS

// StaticFiles returns the browser client's file tree the edge serves (see Page): the
// page committed under static/ plus the module `make build` put in static/gen.
func StaticFiles() fs.FS {
	sub, _ := fs.Sub(embedded, "static")
	return sub
}

// Edge timing. Watch answers come at least every routetable.DefaultRouteWait; retries
// after a failed watch are fast because the orchestrator is on loopback and players
// wait for it.
const (
	watchRetry     = 250 * time.Millisecond
	refreshTimeout = time.Second
	joinTimeout    = 60 * time.Second // a join may wait for a lazily started map
	maxJoinBody    = public.MaxPlayerBody
)

// How the edge reaches maps (EDGE_MAP_DIAL). A map container publishes its game port on
// 127.0.0.1, and the edge, in the host's network namespace, can also reach the
// container's own address on the map network. Traffic to a published port crosses
// Docker's userland proxy, a process that copies every byte once more: under a crowd
// it costs as much CPU as the map itself. The map network's address has no such hop.
// On Swarm (MapDialOverlay) a map publishes nothing: the edge, a container on the
// maps' overlay network, reaches it there or not at all.
const (
	MapDialNetwork  = "network"
	MapDialLoopback = "loopback"
	MapDialOverlay  = "overlay"
)

// Edge serves the public listener and the loopback metrics listener. Set the fields (New
// sets defaults), call Open, and Close at shutdown, which drains.
type Edge struct {
	PublicAddr, MetricsAddr string
	// OrchURL is the orchestrator's control listener, which the edge calls with the
	// credential: Credential, or the contents of CredentialFile once that exists.
	OrchURL        string
	Credential     string
	CredentialFile string
	// DrainTimeout bounds how long Close leaves open WebSockets to end on their own.
	DrainTimeout time.Duration
	// HandoverSocket, when set, is the unix socket where Open takes the listeners of
	// the edge this one replaces, and where this edge then hands them to the edge that
	// replaces it (handover.go). HandoverSpread is how long, after that, Close takes
	// to close this edge's players' WebSockets.
	HandoverSocket string
	HandoverSpread time.Duration
	// Static is the browser client's file tree (StaticFiles unless a test swaps it),
	// read once by Open into the served Page.
	Static   fs.FS
	Proxy    *Proxy
	Routes   *Routes
	Registry *prometheus.Registry
	Log      *slog.Logger
	// JoinLimit, APILimit and WSLimit limit joins, character API calls and map
	// WebSocket upgrades per client address (nil: no limit); Clients says how a
	// request's client address is found.
	JoinLimit, APILimit, WSLimit *ratelimit.Limiter
	Clients                      ratelimit.ClientAddr
	// Assets is the asset sets the public listener serves (assets.go).
	Assets *AssetStore
	// ACMEHTTPClient, when set, is the HTTP client the edge asks its ACME CA with
	// (EDGE_ACME_DIRECTORY); tests give one that trusts their CA.
	ACMEHTTPClient *http.Client

	// dialNetwork says whether maps are dialled on their map network address first
	// (EDGE_MAP_DIAL=network), until such a dial fails where the loopback port works.
	dialNetwork atomic.Bool
	// overlayOnly: maps are reached on their network address alone (EDGE_MAP_DIAL=overlay).
	overlayOnly bool

	// cfg is the configuration New was given: Open reads the HTTPS settings from it.
	cfg Config
	// HTTPS (tls.go), when configured: the public listener's TLS configuration, its
	// certificates from files or an ACME CA, its series, and the plain HTTP listener
	// that redirects to it.
	tlsConfig *tls.Config
	files     *fileCerts
	acme      *acmeCerts
	tlsm      *tlsMetrics
	httpLn    net.Listener

	source  RouteSource // nil with static routes
	page    *Page
	public  *echo.Echo
	servers httpkit.Servers
	metrics httpkit.Servers
	join    *http.Client

	publicLn, metricsLn net.Listener
	cancel              context.CancelFunc
	watchDone           chan struct{}
	refreshMu           sync.Mutex
	ho                  handoverState
}

// New returns an Edge configured by cfg.
func New(cfg Config, log *slog.Logger) (*Edge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, w := range cfg.normalise() {
		log.Warn(w)
	}
	e := &Edge{
		cfg:        cfg,
		PublicAddr: cfg.PublicAddr, MetricsAddr: cfg.MetricsAddr,
		OrchURL: strings.TrimRight(cfg.OrchURL, "/"), Credential: cfg.Credential, CredentialFile: cfg.CredentialFile,
		DrainTimeout:   envconf.Ms(cfg.DrainTimeoutMS),
		HandoverSocket: cfg.HandoverSocket, HandoverSpread: envconf.Ms(cfg.HandoverSpreadMS),
		Static:   StaticFiles(),
		Proxy:    NewProxy(cfg.MaxConns, log),
		Registry: prometheus.NewRegistry(),
		Log:      log,
	}
	e.Proxy.IdleTimeout = envconf.Ms(cfg.IdleTimeoutMS)
	e.Proxy.WriteTimeout = envconf.Ms(cfg.WriteTimeoutMS)
	e.Proxy.Engine = cfg.Engine
	e.Proxy.Link = cfg.MapLink != "off"
	e.Proxy.LinkBatch = envconf.Ms(cfg.LinkBatchMS)
	e.Proxy.MoveTo = e.moveTo
	e.dialNetwork.Store(cfg.MapDial != MapDialLoopback)
	e.overlayOnly = cfg.MapDial == MapDialOverlay
	e.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	e.Proxy.Metrics = NewMetrics(e.Registry)
	e.JoinLimit = newLimiter(cfg.JoinRatePerMin, cfg.JoinRateBurst, cfg.RateLimitClients)
	e.APILimit = newLimiter(cfg.APIRatePerMin, cfg.APIRateBurst, cfg.RateLimitClients)
	e.WSLimit = newLimiter(cfg.WSRatePerMin, cfg.WSRateBurst, cfg.RateLimitClients)
	e.Clients = ratelimit.ClientAddr{TrustedProxies: cfg.TrustedProxies, Header: cfg.TrustedProxyHeader}
	e.Proxy.Clients = e.Clients
	e.Assets = NewAssetStore(cfg.AssetDir, envconf.Ms(cfg.AssetPollMS), log, e.Registry)
	registerLimitMetrics(e.Registry, map[string]*ratelimit.Limiter{"join": e.JoinLimit, "characters": e.APILimit, "ws": e.WSLimit})
	static, _ := cfg.ParseStaticRoutes()
	if static != nil {
		e.Routes = NewStaticRoutes(static)
	} else {
		e.Routes = &Routes{}
	}
	return e, nil
}

// Open binds both listeners synchronously (so their ports are known when it returns),
// or takes them from the edge answering at HandoverSocket, serves them in the
// background and starts the route watch.
func (e *Edge) Open() (err error) {
	if e.page, err = NewPage(e.Static); err != nil {
		return err
	}
	if missing := e.page.Missing(); len(missing) > 0 {
		e.Log.Warn("the browser client's module was not built into this edge; the page cannot play (run make build)", "missing", missing)
	}
	if err := e.Assets.Open(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			e.Assets.Close()
		}
	}()
	e.join = &http.Client{Timeout: joinTimeout, Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     time.Minute,
	}}
	e.public = httpkit.NewEcho(e.Log)
	e.public.GET("/healthz", e.handleHealthz)
	e.public.GET("/readyz", e.handleReadyz)
	e.public.POST(public.PathJoin, e.handleJoin, e.JoinLimit.Echo(e.Clients))
	api := e.APILimit.Echo(e.Clients)
	e.public.GET(public.PathCharacters, e.handleCharacters, api)
	e.public.POST(public.PathCharacters, e.handleCharacters, api)
	e.public.POST(public.PathCharacters+"/:id/select", e.handleCharacters, api)
	e.public.DELETE(public.PathCharacters+"/:id", e.handleCharacters, api)
	// The page's catch-all would answer other methods of the join with not_found.
	e.public.Match([]string{http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete}, public.PathJoin,
		func(echo.Context) error { return echo.ErrMethodNotAllowed })
	e.public.GET(public.WSPath(":id"), e.handleMapWS, e.WSLimit.Echo(e.Clients))
	e.Assets.Mount(e.public)
	e.public.GET("/", e.handleIndex)
	e.public.GET("/index.html", e.handleIndex)
	e.public.GET(StaticPrefix+":version/*", e.handleAsset)
	e.public.GET(IconPath, func(c echo.Context) error { return e.page.ServeIcon(c.Response(), c.Request()) })
	e.public.GET("/*", func(c echo.Context) error {
		return apierr.Errorf(apierr.ENOTFOUND, "no page at %s", c.Request().URL.Path)
	})
	mux := httpkit.NewEcho(e.Log)
	mux.GET("/healthz", e.handleHealthz)
	mux.GET("/readyz", e.handleReadyz)
	mux.GET(httpkit.PathMetrics, echo.WrapHandler(promhttp.HandlerFor(e.Registry, promhttp.HandlerOpts{})))
	if err := e.openTLS(); err != nil {
		return err
	}

	takeover, err := e.listen()
	if err != nil {
		e.closeTLS()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	if e.tlsConfig != nil {
		e.servers.Serve(newTLSListener(e.publicLn, e.tlsConfig, envconf.Ms(e.cfg.TLSHandshakeTimeoutMS), e.tlsm, e.Log), e.public)
		if e.httpLn != nil {
			var h http.Handler = redirectToHTTPS(e.publicLn.Addr().(*net.TCPAddr).Port, e.tlsm)
			if e.acme != nil {
				h = e.acme.httpHandler(h)
			}
			e.servers.Serve(e.httpLn, h)
		}
		if e.acme != nil {
			e.acme.prefetch(ctx)
		}
	} else {
		e.servers.Serve(e.publicLn, e.public)
	}
	e.metrics.Serve(e.metricsLn, mux)

	e.cancel, e.watchDone = cancel, make(chan struct{})
	if e.Routes.isStatic() {
		close(e.watchDone)
	} else {
		go func() {
			defer close(e.watchDone)
			e.watch(ctx)
		}()
	}
	e.completeHandover(takeover)
	return nil
}

// Close stops accepting, lets open WebSockets end on their own for DrainTimeout (or
// until ctx is done), closes the rest, and then stops the route watch and the metrics
// listener. After a handover (HandedOver) it closes the WebSockets at once instead,
// spread over HandoverSpread, since their players resume through the new edge.
func (e *Edge) Close(ctx context.Context) error {
	var errs []error
	e.closeHandover()
	if e.handedOverYet() {
		e.Proxy.closeSpread(ctx, e.HandoverSpread)
	}
	errs = append(errs, e.servers.Close(ctx))
	drain, cancel := context.WithTimeout(ctx, e.DrainTimeout)
	errs = append(errs, e.Proxy.Close(drain))
	cancel()
	if e.cancel != nil {
		e.cancel()
		<-e.watchDone
	}
	e.Assets.Close()
	errs = append(errs, e.metrics.Close(ctx))
	e.closeTLS()
	return errors.Join(errs...)
}

// PublicURL is the base URL of the public listener, on loopback when it binds all
// interfaces: https:// with HTTPS on.
func (e *Edge) PublicURL() string {
	scheme := "http://"
	if e.tlsConfig != nil {
		scheme = "https://"
	}
	return scheme + httpkit.LoopbackHostPort(e.publicLn.Addr())
}

// HTTPURL is the base URL of the plain HTTP listener (EDGE_HTTP_ADDR), or "" when
// there is none.
func (e *Edge) HTTPURL() string {
	if e.httpLn == nil {
		return ""
	}
	return "http://" + httpkit.LoopbackHostPort(e.httpLn.Addr())
}

// MetricsURL is the base URL of the metrics listener.
func (e *Edge) MetricsURL() string { return "http://" + httpkit.LoopbackHostPort(e.metricsLn.Addr()) }

// credential returns the edge's control credential: Credential, or the contents of
// CredentialFile, read at each call so that the edge follows the orchestrator, which
// writes the file at every start (after the edge's first start, or after a rotation of
// the root changed the credential).
func (e *Edge) credential() (string, error) {
	if e.Credential != "" {
		return e.Credential, nil
	}
	b, err := os.ReadFile(e.CredentialFile)
	if err != nil {
		return "", fmt.Errorf("read credential: %w", err)
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return s, nil
	}
	return "", fmt.Errorf("read credential: %s is empty", e.CredentialFile)
}

// client returns a control client with the secret, or nil while there is none.
func (e *Edge) client() *routetable.Client {
	if e.source != nil {
		return nil
	}
	s, err := e.credential()
	if err != nil {
		return nil
	}
	// No client timeout: the watch is a long poll bounded by its context.
	return &routetable.Client{BaseURL: e.OrchURL, Secret: s, HTTP: &http.Client{Transport: e.join.Transport}}
}

// SetSource makes the edge watch src instead of the orchestrator at OrchURL; tests use
// it. Call it before Open.
func (e *Edge) SetSource(src RouteSource) { e.source = src }

func (e *Edge) routeSource() RouteSource {
	if e.source != nil {
		return e.source
	}
	if c := e.client(); c != nil {
		return c
	}
	return nil
}

// watch keeps the route table current with the orchestrator's long poll. When the
// orchestrator does not answer, the edge says so (joins fail fast) and keeps its table.
func (e *Edge) watch(ctx context.Context) {
	online := true
	for ctx.Err() == nil {
		src := e.routeSource()
		var err error
		if src == nil {
			err = errors.New("no secret yet")
		} else {
			after, _ := e.Routes.versionAndTime()
			var t routetable.RouteTable
			wctx, cancel := context.WithTimeout(ctx, routetable.DefaultRouteWait+10*time.Second)
			t, err = src.WatchRoutes(wctx, after, routetable.DefaultRouteWait)
			cancel()
			if err == nil {
				e.Routes.set(t, time.Now())
				e.Proxy.Metrics.table(true, len(t.Routes))
				if !online {
					e.Log.Info("orchestrator reachable again", "routes", len(t.Routes))
				}
				online = true
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		e.Routes.setOffline()
		e.Proxy.Metrics.table(false, e.Routes.Len())
		if online {
			if apierr.Code(err) == apierr.EEDGEUNAUTHORIZED {
				e.Log.Error("the orchestrator refused the edge's credential; serving the last route table", "err", err)
			} else {
				e.Log.Warn("orchestrator unreachable; serving the last route table", "err", err)
			}
			online = false
		}
		select {
		case <-ctx.Done():
		case <-time.After(watchRetry):
		}
	}
}

// refresh fetches the table at once, for a WebSocket whose instance the edge's copy
// does not show ready yet (a join may have just started it). Concurrent misses share one
// fetch.
func (e *Edge) refresh(ctx context.Context, missedAt time.Time) {
	if e.Routes.isStatic() {
		return
	}
	if online, _ := e.Routes.Status(); !online {
		return
	}
	e.refreshMu.Lock()
	defer e.refreshMu.Unlock()
	if _, fetched := e.Routes.versionAndTime(); fetched.After(missedAt) {
		return
	}
	src := e.routeSource()
	if src == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	if t, err := src.WatchRoutes(ctx, "", 0); err == nil {
		e.Routes.set(t, time.Now())
	}
}

// moveTo is the address of the container of instanceID's generation, where a map
// moves a player in a live upgrade: the route table is asked again until it shows that
// generation, up to edgelink.MoveWait (the orchestrator switches the instance to its
// next container just before the map moves its players).
func (e *Edge) moveTo(instanceID, generation string) (string, error) {
	deadline := time.Now().Add(edgelink.MoveWait)
	for {
		rt, ok := e.Routes.Lookup(instanceID)
		switch {
		case ok && rt.Generation == generation && rt.Open():
			if rt.GameAddr != "" && e.dialNetwork.Load() {
				return rt.GameAddr, nil
			}
			if e.overlayOnly {
				return "", fmt.Errorf("the route of %q has no map network address", instanceID)
			}
			return net.JoinHostPort("127.0.0.1", strconv.Itoa(rt.GamePort)), nil
		case time.Now().After(deadline):
			return "", fmt.Errorf("the route table shows no open container of generation %q of %q within %s", generation, instanceID, edgelink.MoveWait)
		}
		e.refresh(context.Background(), time.Now())
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *Edge) handleHealthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok", "version": Version})
}

// handleReadyz answers 200 while the orchestrator is reachable and its default map takes
// players: what `make up` waits for.
func (e *Edge) handleReadyz(c echo.Context) error {
	online, ready := e.Routes.Status()
	switch {
	case !online:
		return apierr.Errorf(apierr.EUNAVAILABLE, "the orchestrator is not reachable")
	case !ready:
		return apierr.Errorf(apierr.EUNAVAILABLE, "default map is not ready")
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

// handleMapWS refuses, before any upgrade, what cannot take a player: unknown instances
// (map_unavailable) and whatever the orchestrator's readiness gate refused, with its
// code (map_quarantined, map_unavailable), as the route table carries it.
// Everything else is the proxy's.
func (e *Edge) handleMapWS(c echo.Context) error {
	id := c.Param("id")
	if !record.ValidName(id) {
		return apierr.Errorf(apierr.ENOTFOUND, "no map instance has that id")
	}
	rt, ok := e.Routes.Lookup(id)
	if !ok || !rt.Open() {
		e.refresh(c.Request().Context(), time.Now())
		rt, ok = e.Routes.Lookup(id)
	}
	switch {
	case !ok:
		e.Proxy.Metrics.refused("unknown")
		return apierr.Errorf(apierr.EMAPUNAVAILABLE, "no map instance %q", id)
	case rt.Code != "":
		e.Proxy.Metrics.refused("not_ready")
		return apierr.Errorf(rt.Code, "%s", rt.Message)
	case rt.GamePort == 0:
		e.Proxy.Metrics.refused("not_ready")
		return apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q has no game port yet", id)
	}
	if e.overlayOnly {
		if rt.GameAddr == "" {
			e.Proxy.Metrics.refused("not_ready")
			return apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q has no map network address yet", id)
		}
		return e.Proxy.Forward(c.Response(), c.Request(), id, rt.GameAddr)
	}
	loopback := net.JoinHostPort("127.0.0.1", strconv.Itoa(rt.GamePort))
	if rt.GameAddr == "" || !e.dialNetwork.Load() {
		return e.Proxy.Forward(c.Response(), c.Request(), id, loopback)
	}
	err := e.Proxy.Forward(c.Response(), c.Request(), id, rt.GameAddr)
	if !isDialError(err) {
		return err
	}
	// The map network's address is not reachable from here (rootless Docker, a
	// firewall): the loopback port, through Docker's proxy, is the way to every map.
	if err = e.Proxy.Forward(c.Response(), c.Request(), id, loopback); err == nil && e.dialNetwork.CompareAndSwap(true, false) {
		e.Log.Warn("maps are not reachable on their map network address; dialling their loopback ports from now on",
			"instance", id, "addr", rt.GameAddr)
	}
	return err
}

// handleJoin forwards a join to the orchestrator.
func (e *Edge) handleJoin(c echo.Context) error { return e.forward(c, "join") }

// handleCharacters forwards a call of the character API to the orchestrator, the
// player's Authorization header with it.
func (e *Edge) handleCharacters(c echo.Context) error { return e.forward(c, "character API") }

// forward passes a player's call (a join or the character API) to the orchestrator's
// control listener with the secret and the client's address, and its answer back as it
// is, error answers included: a refused ticket or key is the player's to handle. Only
// a refusal of the edge's own credential (edge_unauthorized, the one code the
// orchestrator answers for it alone) becomes unavailable and is logged as the
// operator's error. While the orchestrator is away it fails fast with unavailable.
func (e *Edge) forward(c echo.Context, what string) error {
	r := c.Request()
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return apierr.Errorf(apierr.EUNSUPPORTEDMEDIA, "a %s call is JSON: send Content-Type: application/json (or no body)", what)
		}
	}
	_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(httpkit.BodyReadTimeout))
	body, err := io.ReadAll(io.LimitReader(r.Body, maxJoinBody+1))
	if err != nil {
		return apierr.Errorf(apierr.EBADREQUEST, "read body: %v", err)
	}
	if len(body) > maxJoinBody {
		return apierr.Errorf(apierr.ETOOLARGE, "body larger than %d bytes", maxJoinBody)
	}
	unavailable := apierr.Errorf(apierr.EUNAVAILABLE, "the orchestrator is not reachable; try again shortly")
	if online, _ := e.Routes.Status(); !online && !e.Routes.isStatic() {
		return unavailable
	}
	secret, err := e.credential()
	if err != nil {
		e.Log.Warn(what+": no control secret", "err", err)
		return unavailable
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, e.OrchURL+r.URL.EscapedPath(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s request: %w", what, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(httpkit.SecretHeader, secret)
	if auth := r.Header.Get("Authorization"); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if ip, ok := e.Clients.Of(r); ok {
		req.Header.Set("X-Forwarded-For", ip.String())
	}
	resp, err := e.join.Do(req)
	if err != nil {
		e.Log.Warn(what+": orchestrator unreachable", "err", err)
		return unavailable
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, httpkit.DefaultMaxBodySize))
	if err != nil {
		e.Log.Warn(what+": read orchestrator answer", "err", err)
		return unavailable
	}
	if resp.StatusCode/100 != 2 && errorCode(answer) == apierr.EEDGEUNAUTHORIZED {
		// The one answer that is the edge's own: its credential was refused. Every other
		// error (a 401 for a player's ticket or key included) is the player's.
		e.Log.Error(what+": the orchestrator refused the edge's credential (EDGE_CREDENTIAL or EDGE_CREDENTIAL_FILE is not this orchestrator's)",
			"status", resp.StatusCode)
		return apierr.Errorf(apierr.EUNAVAILABLE, "the orchestrator does not admit this edge; try again shortly")
	}
	for _, h := range forwardedAnswerHeaders {
		if v := resp.Header.Get(h); v != "" {
			c.Response().Header().Set(h, v)
		}
	}
	if len(answer) == 0 {
		return c.NoContent(resp.StatusCode)
	}
	return c.Blob(resp.StatusCode, echo.MIMEApplicationJSON, answer)
}

// forwardedAnswerHeaders are the headers of the orchestrator's answer that tell the
// player how to call again: the Bearer challenge of the character API (RFC 6750) and
// when to come back after a refusal for load.
var forwardedAnswerHeaders = []string{echo.HeaderWWWAuthenticate, echo.HeaderRetryAfter}

// errorCode returns the code of an error envelope ({"error":{"code",...}}), or "" when
// body is none.
func errorCode(body []byte) string {
	var e httpkit.ErrorResponse
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Error.Code
}

// handleIndex serves the browser client's page.
func (e *Edge) handleIndex(c echo.Context) error {
	e.page.ServeIndex(c.Response(), c.Request())
	return nil
}

// handleAsset serves one of the page's versioned files.
func (e *Edge) handleAsset(c echo.Context) error {
	name := strings.TrimPrefix(path.Clean("/"+c.Param("*")), "/")
	return e.page.ServeAsset(c.Response(), c.Request(), c.Param("version"), name)
}
