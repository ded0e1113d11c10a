// Package tickloop is a map server's tick runtime: the one goroutine that owns the game
// state. It steps the simulation at a fixed rate (an accumulator with bounded catch-up),
// takes connections' inputs from one channel (no lock on the hot path), builds each
// client's snapshot after the step and hands it to the connection's bounded queue
// (a client that cannot keep up is dropped, never the tick), and keeps the player set:
// the handshake's outcome, resume tokens, portals and persistence pushes.
//
// Connections talk to the loop only through messages: the loop is the mapserver.Handshaker
// of the transport, and the Session it hands back posts what the client sends.
//
// The game the loop drives is a gameapi.Game, one interface whose every method but
// Decode runs on the tick goroutine; the loop asks nothing else of it, and tells no
// value it holds apart at run time (house_test.go).
package tickloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
)

// Defaults of the Loop's tunables.
const (
	// DefaultMaxCatchUp bounds the steps one late wake-up runs: a stall of a second
	// then costs a skipped second, not a burst of thirty steps while clients wait.
	DefaultMaxCatchUp = 4
	// DefaultResumeTTL is how long a character whose connection dropped waits for its
	// client to resume (MAP_RESUME_TTL_MS).
	DefaultResumeTTL  = 10 * time.Second
	DefaultWorldWait  = 2 * time.Second
	DefaultRedeemWait = 5 * time.Second
	// InboxSize bounds the messages waiting for the next tick; a full inbox makes
	// connections' readers wait (back-pressure on clients), never the tick.
	InboxSize = 8192
)

// World is the static world the loop runs, as a welcome describes it.
type World struct {
	Config mapgen.MapConfig
	Hash   string
}

// Loop owns the game state of one map instance. Set the exported fields, call Open,
// hand the world to SetWorld once generated, and Close at shutdown.
type Loop struct {
	TickHz, SnapshotHz int
	MaxCatchUp         int
	ResumeTTL          time.Duration
	WorldWait          time.Duration
	RedeemWait         time.Duration

	Redeemer Redeemer
	// Items loads what an arriving character holds (gameapi.Arrival.Items); nil
	// admits characters with nothing.
	Items ItemLoader
	Link  Link
	// Writes, when set, is held during each snapshot round (see Writes).
	Writes  Writes
	Metrics *Metrics
	Log     *slog.Logger
	// Now is the clock of resume deadlines.
	Now func() time.Time
	// HandoffCutDelay holds a live upgrade's cut back this long after each handoff
	// call that holds characters (MAP_FAULT_HANDOFF_DELAY_MS): a fault for the tests
	// of a handoff interrupted midway; 0, the default, cuts at the first tick it can.
	HandoffCutDelay time.Duration

	inbox     chan message
	ready     chan struct{}
	worldOnce sync.Once
	world     World        // written once before ready is closed
	decoder   gameapi.Game // the game's Decode, safe for concurrent use; set with world

	cancel  context.CancelFunc
	done    chan struct{}
	opened  atomic.Bool
	closing atomic.Bool
	tick    atomic.Uint64
	players atomic.Int64
	// refusing is set by the first handoff call: Hello refuses everyone from then on,
	// before redeeming anything (see handoff.go).
	refusing atomic.Bool

	// Owned by the tick goroutine.
	game      gameapi.Game
	out       gameapi.Recorder // what the game's last call handed the kit (see act)
	chars     map[string]*player
	entities  map[uint64]*player // the characters by the entity id the game shows them under
	tokens    map[string]*player
	pending   map[string]pendingCritical // critical event id → what awaits its answer
	handoff   *handoff                   // the live upgrade, once called
	lastRound uint64                     // the tick of the last snapshot round
	phased    uint64                     // players given a snapshot phase so far (see nextPhase)
	arena     []byte                     // the frames of the last snapshot round
	stats     gameapi.Stats              // the game's figures after the last step
	dropped   uint64                     // the game's InputsDropped already counted in Metrics
}

// New returns a Loop that redeems tickets through r and sends everything else for the
// orchestrator through link.
func New(r Redeemer, link Link, tickHz, snapshotHz int, log *slog.Logger) *Loop {
	return &Loop{
		TickHz: tickHz, SnapshotHz: snapshotHz, MaxCatchUp: DefaultMaxCatchUp, ResumeTTL: DefaultResumeTTL,
		WorldWait: DefaultWorldWait, RedeemWait: DefaultRedeemWait,
		Redeemer: r, Link: link, Log: log, Now: time.Now,
		ready: make(chan struct{}), done: make(chan struct{}), inbox: make(chan message, InboxSize),
		chars: make(map[string]*player), tokens: make(map[string]*player), pending: make(map[string]pendingCritical),
		entities: make(map[uint64]*player),
	}
}

// Open validates the settings and starts the tick goroutine.
func (l *Loop) Open() error {
	if l.TickHz < 1 || l.SnapshotHz < 1 || l.SnapshotHz > l.TickHz {
		return fmt.Errorf("loop: tick rate %d and snapshot rate %d: need 1 <= snapshot <= tick", l.TickHz, l.SnapshotHz)
	}
	if l.Redeemer == nil || l.Link == nil {
		return errors.New("loop: a Redeemer and a Link are required")
	}
	if !l.opened.CompareAndSwap(false, true) {
		return errors.New("loop: already opened")
	}
	if l.Log == nil {
		l.Log = slog.New(slog.DiscardHandler)
	}
	if l.Metrics == nil {
		l.Metrics = NewMetrics(nil)
	}
	if l.MaxCatchUp < 1 {
		l.MaxCatchUp = DefaultMaxCatchUp
	}
	if l.Now == nil {
		l.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.run(ctx)
	return nil
}

// SetWorld hands the loop its generated world and the game built for it (with the
// loop's TickHz and SnapshotHz). Only the first call counts: a map runs one world.
// Players are admitted from then on.
func (l *Loop) SetWorld(w World, g gameapi.Game) {
	l.worldOnce.Do(func() {
		l.world, l.decoder = w, g
		// Posted before ready closes, so it reaches the tick before any join.
		l.post(message{op: opWorld, game: g})
		close(l.ready)
	})
}

// Close sends every connected player a 1001 close, pushes every character's state,
// and stops the tick goroutine. Joins still waiting are refused with map_unavailable.
func (l *Loop) Close() error {
	if !l.opened.Load() || !l.closing.CompareAndSwap(false, true) {
		return nil
	}
	l.cancel()
	<-l.done
	return nil
}

// Players is the number of characters in the game state (connected, or waiting for
// their client to resume); heartbeats report it, and the orchestrator stops an idle
// map only when it is zero.
func (l *Loop) Players() int { return int(l.players.Load()) }

// Tick is the number of simulation steps run so far.
func (l *Loop) Tick() uint64 { return l.tick.Load() }

// post hands a message to the tick, waiting while the inbox is full; false once the
// loop has stopped.
func (l *Loop) post(m message) bool {
	select {
	case <-l.done:
		return false
	default:
	}
	select {
	case l.inbox <- m:
		return true
	case <-l.done:
		return false
	}
}

// run is the tick goroutine: it wakes at every tick deadline, runs the steps that are
// due (at most MaxCatchUp), then the snapshots due, and sleeps until the next deadline.
func (l *Loop) run(ctx context.Context) {
	defer close(l.done)
	defer l.crash()
	period := time.Second / time.Duration(l.TickHz)
	start := time.Now()
	next := start
	lastWake := start
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			l.shutdown()
			return
		case <-timer.C:
		}
		now := time.Now()
		l.Metrics.TickInterval.Observe(now.Sub(lastWake).Seconds())
		lastWake = now

		steps := 0
		for !now.Before(next) && steps < l.MaxCatchUp {
			l.step()
			next = next.Add(period)
			steps++
		}
		if steps > 1 {
			l.Metrics.Overruns.Inc()
		}
		if behind := now.Sub(next); behind >= 0 {
			// Still behind after the bound: give the backlog up rather than burst, and
			// start a fresh schedule one period from now.
			l.Metrics.SkippedTicks.Add(float64(behind/period + 1))
			next = now.Add(period)
		}
		if steps > 0 {
			l.snapshot()
		}
		l.Metrics.TickDuration.Observe(time.Since(now).Seconds())
		timer.Reset(time.Until(next))
	}
}

// crash ends the process when the tick panics (a game's defect, or the kit's): the
// panic is logged with its stack and raised again, so the map exits non-zero and the
// orchestrator restarts it like any crash, from the last push. Nothing recovers it:
// a tick that went on after a panic would run a game whose state is half changed, and
// one that stopped would hold every player of the map while its heartbeats, which
// another goroutine sends, kept it looking alive.
func (l *Loop) crash() {
	if v := recover(); v != nil {
		l.Log.Error("the tick panicked; the map exits", "panic", fmt.Sprint(v), "tick", l.tick.Load(), "stack", string(debug.Stack()))
		panic(v)
	}
}

// step runs one tick: the messages that arrived since the last one, then the
// simulation.
func (l *Loop) step() {
	for n := len(l.inbox); n > 0; n-- {
		l.handle(<-l.inbox)
	}
	l.progressHandoff()
	l.tick.Add(1)
	l.Metrics.Ticks.Inc()
	if l.game != nil {
		l.game.Step(&l.out)
		l.act()
		l.stats = l.game.Stats()
		if d := l.stats.InputsDropped; d != l.dropped {
			l.Metrics.InputsDropped.Add(float64(d - l.dropped))
			l.dropped = d
		}
		if l.Link.PushDue() {
			l.pushAll()
		}
	}
}

// nextPhase returns the snapshot phase of a new player: the offset, in ticks times
// SnapshotHz, of the ticks its snapshots are built at (see due). The players are dealt
// round the TickHz/gcd(TickHz, SnapshotHz) distinct phases in turn, so at the default
// 30 Hz ticks and 15 Hz snapshots half of them have their snapshot built at each tick
// instead of all of them at every second tick: a round, the tick's longest part, is
// half as long, and what waits behind it (the next tick, a ping) waits half as long.
func (l *Loop) nextPhase() uint64 {
	g := gcd(l.TickHz, l.SnapshotHz)
	phases := uint64(l.TickHz / g)
	phase := l.phased % phases * uint64(g)
	l.phased++
	return phase
}

// due reports whether the player of phase has a snapshot due in the ticks (prev, t]:
// whether (tick*SnapshotHz + phase)/TickHz grew, which it does SnapshotHz times a
// second, evenly spaced, whatever the phase.
func (l *Loop) due(phase, prev, t uint64) bool {
	s, hz := uint64(l.SnapshotHz), uint64(l.TickHz)
	return (t*s+phase)/hz > (prev*s+phase)/hz
}

// gcd is the greatest common divisor of a and b, at least 1.
func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return max(a, 1)
}

// snapshot sends every connected player whose snapshot is due its snapshot of the
// current tick, releases characters whose resume window has passed, and updates the
// gauges.
func (l *Loop) snapshot() {
	now := l.Now()
	t, prev := l.tick.Load(), l.lastRound
	l.lastRound = t
	connected := 0
	// A fresh arena each round, sized for what the last round wrote.
	l.arena = make([]byte, 0, max(len(l.arena)+len(l.arena)/4, 4096))
	if l.Writes != nil {
		l.Writes.HoldWrites()
		defer l.Writes.ReleaseWrites()
	}
	// Counted per round and added once: a labelled counter's lookup per client was a
	// fourteenth of the round.
	var count [2]struct{ frames, bytes int }
	for _, p := range l.chars {
		if p.sess == nil {
			// A character a handoff transfer carries leaves with its answer.
			if !now.Before(p.expires) && !p.handoff {
				l.release(p, "resume window passed")
			}
			continue
		}
		connected++
		if p.view == nil || !l.due(p.phase, prev, t) {
			continue
		}
		if ack := p.sess.acked.Swap(0); ack != 0 {
			p.view.Ack(ack)
		}
		// Every frame of a round is encoded into one arena: one allocation per round
		// instead of one per client. A frame is capped at its own length, and the
		// arena only grows by appending, so a frame still waiting in a send queue is
		// never written again (a grown arena leaves it in the old array).
		start := len(l.arena)
		var full bool
		l.arena, full = p.view.Snapshot(l.arena)
		frame := l.arena[start:len(l.arena):len(l.arena)]
		if len(frame) == 0 {
			continue
		}
		if l.send(p, frame, true) {
			c := &count[0]
			if full {
				c = &count[1]
			}
			c.frames++
			c.bytes += len(frame)
		}
	}
	for i, mode := range [...]string{"delta", "full"} {
		if count[i].frames > 0 {
			l.Metrics.Snapshots.WithLabelValues(mode).Add(float64(count[i].frames))
			l.Metrics.SnapshotBytes.WithLabelValues(mode).Add(float64(count[i].bytes))
		}
	}
	l.players.Store(int64(len(l.chars)))
	l.Metrics.Players.Set(float64(len(l.chars)))
	l.Metrics.Connections.Set(float64(connected))
	l.Metrics.Entities.Set(float64(l.stats.Entities))
}

// send queues a frame for p's connection. A full queue drops the connection: the
// character waits for a resume like any other that lost its connection.
func (l *Loop) send(p *player, frame []byte, binary bool) bool {
	if p.sess == nil {
		return false
	}
	if p.sess.send(frame, binary) {
		return true
	}
	l.detach(p, 0, "")
	return false
}

// shutdown ends every connection with 1001 and pushes every character's state; what
// is still in the inbox is answered first, so no join waits forever.
func (l *Loop) shutdown() {
	for n := len(l.inbox); n > 0; n-- {
		l.handle(<-l.inbox)
	}
	for _, p := range l.chars {
		if p.sess != nil {
			p.sess.peer.Close(mapserver.CloseGoingAway, "map stopping")
		}
		l.push(p)
	}
	l.pushInstance()
	if l.handoff != nil && len(l.handoff.calls) > 0 {
		l.answerHandoff()
	}
	l.players.Store(0)
	l.Log.Info("tick loop stopped", "tick", l.tick.Load(), "characters", len(l.chars))
}
