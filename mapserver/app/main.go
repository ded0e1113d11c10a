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
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapenv"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/listen"
	"github.com/mapyard/mapyard/mapserver/outbox"
	"github.com/mapyard/mapyard/mapserver/tickloop"
	"github.com/mapyard/mapyard/mapserver/ws"
)

// DefaultStopTimeout bounds a clean stop: pushing the last states and closing the
// listeners.
const DefaultStopTimeout = 5 * time.Second

// Main is one map server. Set Config and Log, call Open, and Close at shutdown; the
// parts are exported so tests can look inside.
type Main struct {
	Config mapenv.Config
	Log    *slog.Logger
	// NewGame builds the game of the generated world; nil means the reference game
	// (game.Build) with the host's options (MAP_VIEW_CAP, MAP_VIEW_NEAR, MAP_RECOVERY_EVERY_TICKS).
	NewGame gameapi.New
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
	Loop     *tickloop.Loop
	Link     *outbox.Link
	Players  *ws.Server

	mu        sync.Mutex
	world     *mapgen.World
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
		m.NewGame = game.Build(game.Options{ViewCap: cfg.ViewCap, ViewNear: cfg.ViewNear, RecoveryEveryTicks: uint64(cfg.RecoveryEveryTicks)})
	}
	if cfg.FaultPanicAtTick > 0 {
		m.Log.Warn("fault injection: the game panics at a tick", "tick", cfg.FaultPanicAtTick)
		m.NewGame = panicAt(m.NewGame, cfg.FaultPanicAtTick)
	}
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

	m.Loop = tickloop.New(m.Orch, nil, cfg.TickHz, cfg.SnapshotHz, m.Log)
	m.Loop.ResumeTTL = cfg.ResumeTTL()
	if cfg.FaultHandoffDelayMS > 0 {
		m.Log.Warn("fault injection: a live upgrade's handoff cut is delayed", "delayMs", cfg.FaultHandoffDelayMS)
		m.Loop.HandoffCutDelay = time.Duration(cfg.FaultHandoffDelayMS) * time.Millisecond
	}
	m.Loop.Items = m.Orch
	m.Loop.Metrics = tickloop.NewMetrics(m.Registry)
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
	m.HTTP.OnHandoff = m.Loop.Handoff
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

// start is called once the orchestrator names the instance: the world is generated and
// the game built from the config inside the request (milliseconds), so that a config
// the game cannot run is refused to the orchestrator with the game's reason
// (map_config_refused) and the server stays free; only then does the link register
// under the instance and the loop take the world.
func (m *Main) start(r mapcontract.StartInstance, mc mapgen.MapConfig) error {
	begin := time.Now()
	w, err := mapgen.Generate(mc)
	if err != nil {
		return apierr.Errorf(apierr.EMAPCONFIGREFUSED, "generate the world of %q: %v", r.InstanceID, err)
	}
	g, err := m.NewGame(gameapi.Setup{
		Config: mc, World: w, TickHz: m.Config.TickHz, SnapshotHz: m.Config.SnapshotHz,
		Orchestrator: m.Orch, Context: context.Background(), Log: m.Log,
	})
	if err != nil {
		msg := err.Error()
		if e := (*apierr.Error)(nil); errors.As(err, &e) {
			msg = e.Message
		}
		return apierr.Errorf(apierr.EMAPCONFIGREFUSED, "the game refused the config of %q: %s", r.InstanceID, msg)
	}
	if m.Identity != nil {
		m.Identity.Set(r.InstanceID, r.MapID)
	}
	m.Link.Rebind(r.InstanceID, r.MapID)
	m.mu.Lock()
	m.world = w
	m.mu.Unlock()
	m.HTTP.SetWorldHash(w.Hash())
	m.Loop.SetWorld(tickloop.World{Config: mc, Hash: w.Hash()}, g)
	m.Log.Info("world generated", "worldHash", w.Hash(), "seed", mc.Seed, "tookMs", time.Since(begin).Milliseconds())
	return nil
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
