// Package httpapi serves the orchestrator's two HTTP listeners with echo: the public
// listener (health, readiness, the join and the character API; on loopback by default,
// because players reach mapyard through the edge, package edge) and the control
// listener (the control RPC for map servers and the admin API for ops), which binds
// host-local addresses only. Map routes demand a map credential and act only for the
// instance it names; admin routes demand the root secret.
package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/routetable"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/critical"
	"github.com/mapyard/mapyard/orchestrator/keys"
)

// Server owns both listeners. Set the fields, call Open, and Close at shutdown.
type Server struct {
	// PublicAddr and ControlAddr are host:port to listen on; port 0 picks a free port.
	PublicAddr  string
	ControlAddr string
	// ControlExtraIPs are further addresses the control listener binds, on the same port
	// as ControlAddr: the map network's gateway, so that map containers reach it.
	ControlExtraIPs []string
	// EdgeOnExtraIPs opens the edge's routes (the route-table watch, join and character
	// forwarding, behind the edge credential) on ControlExtraIPs too: on Swarm the edge
	// is a container on the maps' overlay and reaches the orchestrator there, not on
	// loopback. Set before Open.
	EdgeOnExtraIPs bool
	// Root verifies map credentials and the admin secret.
	Root *keys.Root
	// Callers resolves a map credential to the instance its container runs; nil takes
	// the instance the credential names (the fake orchestrator, whose maps are started
	// by hand).
	Callers   Callers
	Maps      orchestrator.Maps
	Admission Admission
	// Characters serves the character API and Sessions the admin session routes; NewServer
	// sets them when the admission service provides them.
	Characters Characters
	Sessions   Sessions
	Store      Persistence
	// Templates complete an admin create's partial config: the kit's map templates, with
	// the host's laid over them (nil: the kit's alone).
	Templates *mapgen.Templates
	// Critical admits critical events and serves item ownership and policies. NewServer
	// builds it over Store and Admission when both are set and registers its routes.
	Critical CriticalEvents
	Log      *slog.Logger
	// Metrics serves GET /metrics on the control listener (behind the root secret or
	// the metrics credential); nil answers 404.
	Metrics http.Handler
	// MapTargets finds each map's control listener for the proxy of map metrics
	// (PathMapMetrics); nil answers 404.
	MapTargets MapTargets
	// Limits rate-limits joins per client address. The zero value limits nothing.
	Limits PublicLimits

	routes       *routeWatch
	scrapeClient *http.Client
	faults       *Faults // nil unless EnableFaults

	public, control *echo.Echo
	gateway         *echo.Echo // the control port on ControlExtraIPs: map routes only
	servers         httpkit.Servers
	publicLn        net.Listener
	controlLn       net.Listener
	closeOnce       sync.Once
}

// NewServer returns a Server over its dependencies, guarding the control listener with
// credentials derived from root.
func NewServer(maps orchestrator.Maps, adm Admission, store Persistence, root *keys.Root, log *slog.Logger) *Server {
	s := &Server{Maps: maps, Admission: adm, Store: store, Root: root, Log: log,
		public: httpkit.NewEcho(log), control: httpkit.NewEcho(log), gateway: httpkit.NewEcho(log),
		routes: newRouteWatch(maps), scrapeClient: newScrapeClient()}
	s.Characters, _ = adm.(Characters)
	s.Sessions, _ = adm.(Sessions)
	if adm != nil && store != nil {
		s.Critical = critical.NewService(store, adm)
	}
	s.public.Use(s.rateLimit)
	s.public.GET("/healthz", s.handleHealthz)
	s.public.GET("/readyz", s.handleReadyz)
	if adm != nil {
		s.public.POST(public.PathJoin, rpc(maxJoinBody, adm.Join))
	}
	if s.Characters != nil {
		s.characterRoutes(s.public)
	}

	// Map containers reach the control port through the map network's gateway; that
	// address serves the map-facing routes only, so even a map that guessed the root
	// could not stop or create maps or read metrics from there.
	s.mapRoutes(s.gateway.Group("", s.requireMap, s.slow))
	s.mapRoutes(s.control.Group("", s.requireMap, s.slow))
	g := s.control.Group("", s.requireAdmin)
	g.GET(PathAdminMaps, s.handleAdminMaps)
	g.GET(PathAdminMaps+"/:id", s.handleAdminMap)
	g.POST(PathAdminMaps, s.handleAdminCreate)
	g.POST(PathAdminMaps+"/:id/restart", s.handleAdminRestart)
	g.POST(PathAdminMaps+"/:id/stop", s.handleAdminStop)
	g.POST(PathAdminMaps+"/:id/upgrade", s.handleAdminUpgrade)
	g.POST(PathAdminUpgrade, s.handleAdminUpgradeAll)
	if s.Critical != nil {
		s.adminItemRoutes(g)
	}
	// The edge forwards players' joins and character calls here and watches the route
	// table of their WebSockets, with a credential of its own that opens these routes
	// only.
	s.edgeRoutes(s.control.Group("", s.requireEdge, s.slow), adm)
	if s.Sessions != nil {
		g.GET(PathAdminSessions, s.handleAdminSessions)
		g.POST(PathAdminCleanup, s.handleAdminCleanup)
	}
	if audit, ok := store.(SaveAudit); ok {
		g.GET(PathAdminCharacters+"/:id/saves", handleAdminSaves(audit))
	}
	s.metricsRoutes(s.control.Group("", s.requireMetrics))
	return s
}

// mapRoutes registers the routes map servers call.
func (s *Server) mapRoutes(g *echo.Group) {
	g.POST(mapcontract.PathMapReady, s.handleMapReady)
	g.POST(mapcontract.PathMapHeartbeat, s.handleHeartbeat)
	// Tests of the supervisor alone run without admission and store.
	if s.Admission != nil {
		g.POST(mapcontract.PathRedeem, mapRPC(httpkit.DefaultMaxBodySize,
			func(r *mapcontract.RedeemRequest) string { return r.InstanceID }, s.Admission.Redeem))
		g.POST(mapcontract.PathRequestTransfer, mapRPC(httpkit.DefaultMaxBodySize,
			func(r *mapcontract.TransferRequest) string { return r.FromInstanceID }, s.Admission.RequestTransfer))
		g.POST(mapcontract.PathTransferResult, mapRPC(httpkit.DefaultMaxBodySize,
			func(r *mapcontract.TransferResult) string { return r.InstanceID }, ok(s.Admission.TransferResult)))
	}
	if s.Admission != nil && s.Store != nil {
		g.POST(mapcontract.PathPersistSnapshot, mapRPC(maxSnapshotBody,
			func(r *mapcontract.PersistSnapshot) string { return r.InstanceID }, s.persistSnapshot))
	}
	if s.Critical != nil {
		s.mapItemRoutes(g)
	}
}

// Open binds every listener synchronously, so that their ports are known when it
// returns, and serves them in the background.
func (s *Server) Open() (err error) {
	if s.publicLn, err = net.Listen("tcp", s.PublicAddr); err != nil {
		return fmt.Errorf("listen public %s: %w", s.PublicAddr, err)
	}
	if s.controlLn, err = net.Listen("tcp", s.ControlAddr); err != nil {
		s.publicLn.Close()
		return fmt.Errorf("listen control %s: %w", s.ControlAddr, err)
	}
	s.servers.Serve(s.publicLn, s.public)
	s.servers.Serve(s.controlLn, s.control)
	port := strconv.Itoa(s.ControlPort())
	if s.EdgeOnExtraIPs {
		s.edgeRoutes(s.gateway.Group("", s.requireEdge, s.slow), s.Admission)
	}
	for _, ip := range s.ControlExtraIPs {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, port))
		if err != nil {
			s.Close(context.Background())
			return fmt.Errorf("listen control on %s: %w", ip, err)
		}
		s.servers.Serve(ln, s.gateway)
	}
	return nil
}

// edgeRoutes registers the routes the edge calls on g: the route-table watch, and the
// players' joins and character calls it forwards.
func (s *Server) edgeRoutes(g *echo.Group, adm Admission) {
	g.GET(routetable.PathRoutes, s.handleRoutes)
	if adm != nil {
		g.POST(public.PathJoin, rpc(maxJoinBody, adm.Join))
	}
	if s.Characters != nil {
		s.characterRoutes(g)
	}
}

// Close stops accepting connections and waits, up to ctx, for requests in flight;
// route watches answer at once.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { close(s.routes.done) })
	return s.servers.Close(ctx)
}

// PublicURL is the base URL of the public listener, with a loopback host when it binds
// all interfaces.
func (s *Server) PublicURL() string { return "http://" + httpkit.LoopbackHostPort(s.publicLn.Addr()) }

// ControlURL is the base URL of the control listener on loopback.
func (s *Server) ControlURL() string { return "http://" + httpkit.LoopbackHostPort(s.controlLn.Addr()) }

// ControlPort is the port of the control listener.
func (s *Server) ControlPort() int { return s.controlLn.Addr().(*net.TCPAddr).Port }
