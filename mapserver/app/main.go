// Package app is one map server process put together: the game and control listeners,
// the tick loop, the player WebSocket transport and the orchestrator link, with the
// New/Open/Close life the binary (cmd/mapserver) and end-to-end tests share.
package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapenv"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/listen"
	"github.com/mapyard/mapyard/mapserver/loop"
	"github.com/mapyard/mapyard/mapserver/outbox"
	"github.com/mapyard/mapyard/mapserver/ws"
)

// DefaultStopTimeout bounds a clean stop: pushing the last states and closing the
// listeners.
const DefaultStopTimeout = 5 * time.Second

// GameFactory builds the game that simulates a generated world.
type GameFactory func(w *mapgen.World, cfg mapgen.MapConfig, tickHz int) (loop.Game, error)

// Main is one map server. Set Config and Log, call Open, and Close at shutdown; the
// parts are exported so tests can look inside.
type Main struct {
	Config mapenv.Config
	Log    *slog.Logger
	// NewGame builds the simulation of the generated world; nil means game.Factory.
	NewGame GameFactory
	// StopTimeout bounds Close; zero means DefaultStopTimeout.
	StopTimeout time.Duration
	// SendQueue bounds each connection's queued frames; zero means ws.DefaultSendQueue.
	SendQueue int
	// Identity, when set, is told the instance once the orchestrator names it, so that
	// a warm-pool map's log lines name the instance it runs from then on.
	Identity *Identity

	Registry *prometheus.Registry
	Orch     *mapcontract.Client
	HTTP     *listen.Server
	Loop     *loop.Loop
	Link     *outbox.Link
	Players  *ws.Server

	mu        sync.Mutex
	world     *mapgen.World
	generated chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Open binds both listeners, starts the tick loop and the orchestrator link, and
// generates the world as soon as the orchestrator names the instance.
func (m *Main) Open() error {
	cfg := m.Config
	if err := cfg.Validate(); err != nil {
		return err
	}
	if m.Log == nil {
		m.Log = slog.New(slog.DiscardHandler)
	}
	if m.NewGame == nil {
		m.NewGame = game.Factory
	}
	m.generated = make(chan struct{})
	m.Registry = prometheus.NewRegistry()
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Orch = mapcontract.NewClient(cfg.OrchURL, cfg.Credential)

	instanceID, mapID := cfg.Identity()
	m.HTTP = listen.NewServer(cfg.OrchCredential, listen.Health{
		Status: "ok", InstanceID: instanceID, MapID: mapID, Version: mapserver.Version,
	}, m.Log)
	m.HTTP.Blank, m.HTTP.FailHealth = cfg.Blank(), cfg.FaultFailHealth
	m.HTTP.GameAddr = net.JoinHostPort(cfg.ListenHost, strconv.Itoa(cfg.GamePort))
	m.HTTP.ControlAddr = net.JoinHostPort(cfg.ListenHost, strconv.Itoa(cfg.ControlPort))
	m.HTTP.HandleControl(httpkit.PathMetrics, promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))

	m.Loop = loop.New(m.Orch, nil, cfg.TickHz, cfg.SnapshotHz, m.Log)
	m.Loop.ResumeTTL = cfg.ResumeTTL()
	m.Loop.Items = m.Orch
	m.Loop.Metrics = loop.NewMetrics(m.Registry)
	m.Players = ws.NewServer(m.Loop, m.Log)
	m.Players.AllowedOrigins = ws.ParseOrigins(cfg.AllowedOrigins)
	m.Players.SendQueue = m.SendQueue
	m.Players.Limits = ws.Limits{MsgRate: cfg.ConnMsgRate, MsgBurst: cfg.ConnMsgBurst, ByteRate: cfg.ConnByteRate, ByteBurst: cfg.ConnByteBurst}
	m.Players.Metrics = ws.NewMetrics(m.Registry)
	m.Loop.Writes = m.Players
	m.HTTP.HandleGame(mapcontract.GamePath, m.Players)
	// The edge's link: every player it forwards to this map, on one connection.
	m.HTTP.HandleGame(edgelink.Path, http.HandlerFunc(m.Players.ServeLink))
	m.HTTP.OnStart = m.start
	if err := m.HTTP.Open(); err != nil {
		return err
	}

	m.Link = outbox.New(m.Orch, mapcontract.MapReady{
		InstanceID: instanceID, MapID: mapID, GamePort: m.HTTP.GamePort(), ControlPort: m.HTTP.ControlPort(),
		Version: mapserver.Version,
	}, cfg.Heartbeat(), m.Log)
	m.Link.PushEvery = cfg.SnapshotPush()
	m.Link.Players, m.Link.Tick = m.Loop.Players, m.Loop.Tick
	m.Loop.Link = m.Link
	if err := m.Link.Open(); err != nil {
		return errors.Join(err, m.closeHTTP())
	}
	if err := m.Loop.Open(); err != nil {
		return errors.Join(err, m.Link.Close(), m.closeHTTP())
	}
	m.Log.Info("map server listening", "gamePort", m.HTTP.GamePort(), "controlPort", m.HTTP.ControlPort(), "version", mapserver.Version)
	return nil
}

// start is called once the orchestrator names the instance: the link registers under
// it, and the world is generated off the request path (a warm-pool handout answers at
// once; the world is ready within milliseconds, before a player can arrive).
func (m *Main) start(r mapcontract.StartInstance, mc mapgen.MapConfig) {
	if m.Identity != nil {
		m.Identity.Set(r.InstanceID, r.MapID)
	}
	m.Link.Rebind(r.InstanceID, r.MapID)
	go func() {
		defer close(m.generated)
		start := time.Now()
		w, err := mapgen.Generate(mc)
		if err != nil {
			m.Log.Error("generate world", "err", err)
			return
		}
		g, err := m.NewGame(w, mc, m.Config.TickHz)
		if err != nil {
			m.Log.Error("build game", "err", err)
			return
		}
		if c, ok := g.(viewCapper); ok {
			c.SetViewCap(m.Config.ViewCap)
		}
		m.loadItems(r.InstanceID, g)
		m.mu.Lock()
		m.world = w
		m.mu.Unlock()
		m.HTTP.SetWorldHash(w.Hash())
		m.Loop.SetWorld(loop.World{Config: mc, Hash: w.Hash()}, g)
		m.Log.Info("world generated", "worldHash", w.Hash(), "seed", mc.Seed, "tookMs", time.Since(start).Milliseconds())
	}()
}

// viewCapper is a game whose snapshots show a bounded number of entities per client
// (MAP_VIEW_CAP).
type viewCapper interface{ SetViewCap(n int) }

// itemGame is a game with items in its world, which it seeds at the orchestrator and
// loads from its answer.
type itemGame interface {
	ItemSeed() []items.Item
	LoadItems([]items.Item)
}

// recoveryGame is a game that recovers critical items: it takes the policies anchored
// in its instance and their items' ownership state from the same answer.
type recoveryGame interface {
	LoadRecovery(policies []items.Policy, state []items.Item, everyTicks uint64)
}

// ItemLoadLimit bounds how long a starting map waits for its items' ownership state.
const ItemLoadLimit = 15 * time.Second

// loadItems seeds the items the generator placed at the orchestrator and puts in the
// world those the orchestrator says still lie here, so a restarted map never places an
// item a player took. Without the orchestrator's answer the map places none: it never
// guesses who owns what.
func (m *Main) loadItems(instanceID string, g loop.Game) {
	ig, ok := g.(itemGame)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ItemLoadLimit)
	defer cancel()
	a, err := m.Orch.InstanceItems(ctx, mapcontract.InstanceItemsRequest{InstanceID: instanceID, Seed: ig.ItemSeed()})
	if err != nil {
		m.Log.Error("load instance items; the world has none", "err", err)
		return
	}
	ig.LoadItems(a.Items)
	if rg, ok := g.(recoveryGame); ok {
		rg.LoadRecovery(a.Policies, a.Items, uint64(m.Config.RecoveryEveryTicks))
	}
	m.Log.Info("instance items loaded", "seeded", len(ig.ItemSeed()), "owned", len(a.Items), "policies", len(a.Policies))
}

// World returns the generated world, or nil before it exists.
func (m *Main) World() *mapgen.World {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.world
}

// GameURL is the base URL of the game listener (ws://host:port).
func (m *Main) GameURL() string {
	return "ws://" + net.JoinHostPort(m.Config.ListenHost, strconv.Itoa(m.HTTP.GamePort()))
}

// ControlURL is the base URL of the control listener.
func (m *Main) ControlURL() string {
	return "http://" + net.JoinHostPort(m.Config.ListenHost, strconv.Itoa(m.HTTP.ControlPort()))
}

// Close stops the map cleanly: players get a 1001 close, every character's state is
// pushed and flushed to the orchestrator, and the listeners stop.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		timeout := m.StopTimeout
		if timeout <= 0 {
			timeout = DefaultStopTimeout
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var errs []error
		if m.Loop != nil {
			errs = append(errs, m.Loop.Close())
		}
		if m.Players != nil {
			// The loop closed every connection with 1001; let the close frames go out.
			drain, cancel := context.WithTimeout(ctx, 2*time.Second)
			if err := m.Players.Drain(drain); err != nil {
				m.Log.Warn("player connections still open at stop", "connections", m.Players.Active())
			}
			cancel()
		}
		if m.Link != nil {
			if err := m.Link.Flush(ctx); err != nil {
				m.Log.Warn("orchestrator link not flushed at stop", "err", err)
			}
			errs = append(errs, m.Link.Close())
		}
		if m.HTTP != nil {
			errs = append(errs, m.HTTP.Close(ctx))
		}
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
}

func (m *Main) closeHTTP() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return m.HTTP.Close(ctx)
}
