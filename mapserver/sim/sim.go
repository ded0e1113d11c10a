// Package sim is the map's pure simulation: players walking from sequenced inputs and
// NPCs wandering, against the static colliders and bounds of the generated world.
//
// The contract: Step advances the state by exactly one tick. It does no I/O, starts
// no goroutines and reads no clock, and every random choice comes from a PRNG seeded by
// Options.Seed, so a test drives it tick by tick and a replay of the same calls yields
// the same state. Positions are integer quanta of 1/16 unit (one unit is one metre;
// see Vec), and the movement a player's input goes through (Move) is integer math that
// builds for GOOS=js GOARCH=wasm, so the browser predicts bit for bit what the server
// computes.
//
// Entities live in slots: small indices, reused after a removal, that the wire encoding
// and the area-of-interest grid use. State.Entities is indexed by slot; an entity also
// has a stable EntityID, never reused within one State.
//
// A State is not safe for concurrent use: the tick loop owns it.
package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
)

// EntityID is the stable, map-local identity of an entity; never reused in a State.
type EntityID uint64

// Kind tells players from NPCs. Its numeric value is sent on the wire.
type Kind uint8

// Entity kinds; zero marks a free slot.
const (
	KindNone   Kind = 0
	KindPlayer Kind = 1
	KindNPC    Kind = 2
	// KindItem is an item lying in the world (or held, pending an ownership change).
	KindItem Kind = 3
)

// Defaults for Options.
const (
	DefaultTickHz = 30
	// DefaultJitterBuffer is how many inputs a player may have waiting: about half a
	// second at 30 Hz, enough to absorb the inputs that arrive in a burst after a delay
	// spike on a slow link, which are then walked one per tick (later, never faster).
	DefaultJitterBuffer = 16
)

// Entity is one dynamic entity in a slot.
type Entity struct {
	// ID is the stable identity; zero in a free slot.
	ID EntityID
	// Kind is KindPlayer or KindNPC; KindNone in a free slot.
	Kind Kind
	// Pos is the position in quanta.
	Pos Vec
	// DX and DY is the current walking direction.
	DX, DY int8
	// Facing is the direction the entity looks, in 1/256 turns counter-clockwise from
	// east (x growing); players and NPCs face where they last walked.
	Facing uint8
	// State is kind-specific: an NPC's perception state (NPCIdle … NPCChasing), an
	// item's flags (ItemHeld, ItemPending).
	State uint8
	// Template is an item's template id (mapserver/kernel/items); 0 for other kinds.
	Template uint32
}

// NPC perception states, Entity.State of an NPC; their values are sent on the wire.
const (
	NPCIdle       uint8 = 0
	NPCSuspicious uint8 = 1
	NPCAlert      uint8 = 2
	NPCChasing    uint8 = 3
)

// Item flags, Entity.State of an item; sent on the wire.
const (
	// ItemPending marks an item whose change of owner awaits the orchestrator's durable
	// acknowledgement: nobody can take it meanwhile.
	ItemPending uint8 = 1 << 0
)

// Player is the per-player part of a player entity's slot.
type Player struct {
	// LastSeq is the seq of the last input applied or dropped (acked to the client in
	// snapshots).
	LastSeq uint64
	// Stride is the movement state the last applied input left.
	Stride Stride
	// Frozen players stand still and consume their inputs without walking (a player
	// whose portal transfer is in flight).
	Frozen bool
	// Speed is the player's own speed in quanta per second (an encumbered player walks
	// slower); 0 means Options.PlayerSpeed. Set it with SetSpeed.
	Speed int32
	// queued holds inputs not yet applied, in seq order.
	queued []Input
	// lastQueued is the highest seq ever queued; older seqs are dropped.
	lastQueued uint64
	// minQueued is the fewest inputs left waiting after a tick in the current drain
	// window; inputs that waited a whole window are a standing delay, shed at its end.
	minQueued int
	// portal is 1 + the index of the portal the player stands in, 0 when none.
	portal int
}

// npc is the per-NPC part of an NPC entity's slot.
type npc struct {
	vx, vy int64 // velocity from Velocity
	turnAt uint64
}

// Options configure a State. The zero value of a field selects its default, except
// NPCs and Seed, which are taken as given.
type Options struct {
	// TickHz is the number of Steps per simulated second (MAP_TICK_HZ).
	TickHz int
	// Seed drives NPC placement and wandering.
	Seed uint64
	// NPCs is the number of NPCs to spawn; NPCCount derives it from a MapConfig.
	NPCs int
	// PlayerSpeed and NPCSpeed are in quanta per second.
	PlayerSpeed, NPCSpeed int32
	// JitterBuffer bounds each player's waiting inputs; past it the oldest are dropped.
	JitterBuffer int
	// DrainWindow is the number of ticks after which, if two or more inputs waited the
	// whole window (the queue never fell below them), the oldest is dropped, so a burst
	// does not leave a player a standing delay behind its client for long. Default:
	// TickHz.
	DrainWindow int
	// PerceptionEvery is the number of ticks between NPC perception passes.
	PerceptionEvery int
	// SightRange is how far NPCs see, in quanta.
	SightRange int32
	// LoseAfter is how many perception passes a chasing NPC goes without seeing its
	// target before it gives up.
	LoseAfter int32
}

// NPCCount returns the number of NPCs rules ask for on a world of w: NPCDensity per
// square kilometre of the bounds.
func NPCCount(rules mapgen.GenerationRules, w *mapgen.World) int {
	areaM2 := int64(w.Width/CentimetresPerUnit) * int64(w.Height/CentimetresPerUnit)
	return int(int64(rules.NPCDensity) * areaM2 / 1_000_000)
}

// PortalEvent reports that a player stepped into a portal's trigger area this tick
// (once per entry, not on every tick it stays inside).
type PortalEvent struct {
	Slot   int32
	ID     EntityID
	Portal int // index in the world's Portals
}

// Events is what one Step produced. Its slices are owned by the State and valid until
// the next Step.
type Events struct {
	Tick       uint64
	Portals    []PortalEvent
	Perception []PerceptionEvent
}

// Counters are the simulation's running totals since New.
type Counters struct {
	// InputsDropped counts player inputs never walked: past the jitter buffer, or shed
	// as a standing delay at the end of a drain window.
	InputsDropped uint64
}

// State is the dynamic state of one map.
type State struct {
	opts      Options
	colliders *Colliders
	portals   []portal
	spawns    []Vec

	// Entities is indexed by slot; read it, change it only through State's methods.
	Entities []Entity
	// Players is indexed by slot like Entities; meaningful where Kind is KindPlayer.
	Players    []Player
	npcs       []npc
	perceivers []perceiver // indexed by slot, meaningful for NPCs
	seen       playerGrid  // players bucketed for the current perception pass
	free       []int32     // free slots, reused oldest first
	players    int
	npcTotal   int
	items      int

	tick     uint64
	nextID   EntityID
	rng      *rand.Rand
	events   Events
	counters Counters
}

// portal is a world portal in quanta.
type portal struct{ x, y, r int64 }

// New builds the state of world w with opts: colliders converted, NPCs placed on
// walkable ground away from colliders.
func New(w *mapgen.World, opts Options) (*State, error) {
	if w == nil {
		return nil, errors.New("sim: nil world")
	}
	if opts.TickHz == 0 {
		opts.TickHz = DefaultTickHz
	}
	if opts.PlayerSpeed == 0 {
		opts.PlayerSpeed = DefaultPlayerSpeed
	}
	if opts.NPCSpeed == 0 {
		opts.NPCSpeed = DefaultNPCSpeed
	}
	if opts.JitterBuffer == 0 {
		opts.JitterBuffer = DefaultJitterBuffer
	}
	if opts.DrainWindow == 0 {
		opts.DrainWindow = opts.TickHz
	}
	if opts.PerceptionEvery == 0 {
		opts.PerceptionEvery = DefaultPerceptionEvery
	}
	if opts.SightRange == 0 {
		opts.SightRange = DefaultSightRange
	}
	if opts.LoseAfter == 0 {
		opts.LoseAfter = DefaultLoseAfter
	}
	if opts.TickHz < 1 || opts.NPCs < 0 || opts.JitterBuffer < 1 || opts.DrainWindow < 1 || opts.PlayerSpeed < 0 || opts.NPCSpeed < 0 ||
		opts.PerceptionEvery < 1 || opts.SightRange < 1 || opts.LoseAfter < 1 {
		return nil, fmt.Errorf("sim: invalid options %+v", opts)
	}
	s := &State{opts: opts, colliders: NewColliders(w), rng: rand.New(rand.NewPCG(opts.Seed, pcgStream)), nextID: 1}
	for _, p := range w.Portals {
		s.portals = append(s.portals, portal{
			x: int64(FromCentimetres(p.X)), y: int64(FromCentimetres(p.Y)), r: int64(FromCentimetres(p.Radius)),
		})
	}
	for _, sp := range w.Spawns {
		s.spawns = append(s.spawns, s.colliders.NearestOpen(Vec{FromCentimetres(sp.X), FromCentimetres(sp.Y)}))
	}
	for range opts.NPCs {
		s.spawnNPC(w)
	}
	return s, nil
}

// Colliders returns the static geometry the state moves bodies against.
func (s *State) Colliders() *Colliders { return s.colliders }

// Counters returns the running totals since New.
func (s *State) Counters() Counters { return s.counters }

// Tick returns the number of Steps taken.
func (s *State) Tick() uint64 { return s.tick }

// Options returns the options in effect, defaults filled in.
func (s *State) Options() Options { return s.opts }

// PlayerCount returns the number of players.
func (s *State) PlayerCount() int { return s.players }

// NPCCount returns the number of NPCs.
func (s *State) NPCCount() int { return s.npcTotal }

// SpawnPoint returns spawn point i of the world (modulo their number) in quanta, or
// the centre of the bounds when the world has none.
func (s *State) SpawnPoint(i int) Vec {
	if len(s.spawns) == 0 {
		w, h := s.colliders.Bounds()
		return Vec{w / 2, h / 2}
	}
	return s.spawns[(i%len(s.spawns)+len(s.spawns))%len(s.spawns)]
}

// alloc takes a free slot (the oldest freed) or grows the slot arrays.
func (s *State) alloc() int32 {
	if len(s.free) > 0 {
		slot := s.free[0]
		s.free = s.free[1:]
		return slot
	}
	s.Entities = append(s.Entities, Entity{})
	s.Players = append(s.Players, Player{})
	s.npcs = append(s.npcs, npc{})
	s.perceivers = append(s.perceivers, perceiver{})
	return int32(len(s.Entities) - 1)
}

// spawnNPC places one NPC on a random walkable, unblocked point (or anywhere inside
// the bounds after many failed tries) with a random direction.
func (s *State) spawnNPC(w *mapgen.World) {
	bw, bh := s.colliders.Bounds()
	var p Vec
	for try := 0; try < 64; try++ {
		p = Vec{int32(between(s.rng, BodyRadius, int(bw)-BodyRadius)), int32(between(s.rng, BodyRadius, int(bh)-BodyRadius))}
		if !s.colliders.Blocked(p) && (w.Nav.CellSize <= 0 || w.Nav.WalkableAt(ToCentimetres(p.X), ToCentimetres(p.Y))) {
			break
		}
	}
	p = s.colliders.NearestOpen(p)
	slot := s.alloc()
	s.Entities[slot] = Entity{ID: s.nextID, Kind: KindNPC, Pos: p}
	s.perceivers[slot] = perceiver{target: -1}
	s.npcTotal++
	s.nextID++
	s.turn(slot)
}

// AddNPC puts an NPC at pos (moved to the nearest open ground when a body may not
// stand there) walking in direction (dx, dy), which it keeps for 1.5 to 2.5 s like any
// wandering NPC. Maps use it for scripted NPCs; tests to place one.
func (s *State) AddNPC(pos Vec, dx, dy int8) (int32, EntityID) {
	slot := s.alloc()
	id := s.nextID
	s.nextID++
	s.Entities[slot] = Entity{ID: id, Kind: KindNPC, Pos: s.colliders.NearestOpen(pos), DX: dx, DY: dy, Facing: FacingOf(dx, dy)}
	s.perceivers[slot] = perceiver{target: -1}
	s.npcTotal++
	n := &s.npcs[slot]
	n.vx, n.vy = Velocity(dx, dy, s.opts.NPCSpeed)
	n.turnAt = s.tick + uint64(between(s.rng, s.opts.TickHz*3/2, s.opts.TickHz*5/2))
	return slot, id
}

// turn gives NPC slot a new random direction, kept for 1.5 to 2.5 s.
func (s *State) turn(slot int32) {
	e := &s.Entities[slot]
	for {
		e.DX, e.DY = int8(between(s.rng, -MaxDir, MaxDir)), int8(between(s.rng, -MaxDir, MaxDir))
		if e.DX != 0 || e.DY != 0 {
			break
		}
	}
	e.Facing = FacingOf(e.DX, e.DY)
	n := &s.npcs[slot]
	n.vx, n.vy = Velocity(e.DX, e.DY, s.opts.NPCSpeed)
	hz := s.opts.TickHz
	n.turnAt = s.tick + uint64(between(s.rng, hz*3/2, hz*5/2))
}

// pcgStream selects the simulation's PCG stream; PCG is a specified algorithm, so a
// seed yields the same NPCs on every platform and Go release.
const pcgStream = 0x73696d

// between returns a uniform integer in [lo, hi] (lo when hi <= lo).
func between(r *rand.Rand, lo, hi int) int {
	if hi <= lo {
		return lo
	}
	return lo + r.IntN(hi-lo+1)
}

// PlayerState is what a player brings when it is added and leaves with when removed.
type PlayerState struct {
	// Pos is the position in quanta.
	Pos Vec
	// LastSeq is the last input seq already applied (inputs up to it are ignored).
	LastSeq uint64
}

// AddPlayer puts a player at st.Pos (clamped into the bounds, and moved to the nearest
// open ground when a body may not stand there) and returns its slot and stable id. A
// player added inside a portal's area (arriving through the matching portal) is not
// reported as entering it until it has left it once.
func (s *State) AddPlayer(st PlayerState) (int32, EntityID) {
	w, h := s.colliders.Bounds()
	st.Pos.X = max(BodyRadius, min(st.Pos.X, w-BodyRadius))
	st.Pos.Y = max(BodyRadius, min(st.Pos.Y, h-BodyRadius))
	st.Pos = s.colliders.NearestOpen(st.Pos)
	slot := s.alloc()
	id := s.nextID
	s.nextID++
	s.Entities[slot] = Entity{ID: id, Kind: KindPlayer, Pos: st.Pos}
	p := &s.Players[slot]
	*p = Player{LastSeq: st.LastSeq, lastQueued: st.LastSeq, queued: p.queued[:0], minQueued: 0, portal: s.portalAt(st.Pos)}
	s.players++
	return slot, id
}

// RemovePlayer frees the player's slot and returns its final state; false if slot
// holds no player.
func (s *State) RemovePlayer(slot int32) (PlayerState, bool) {
	if slot < 0 || int(slot) >= len(s.Entities) || s.Entities[slot].Kind != KindPlayer {
		return PlayerState{}, false
	}
	st := PlayerState{Pos: s.Entities[slot].Pos, LastSeq: s.Players[slot].LastSeq}
	s.Entities[slot] = Entity{}
	s.Players[slot].queued = s.Players[slot].queued[:0]
	s.free = append(s.free, slot)
	s.players--
	return st, true
}

// SetSpeed sets the speed, in quanta per second, the player in slot walks its next
// inputs with (0: Options.PlayerSpeed). Negative speeds count as 0.
func (s *State) SetSpeed(slot int32, speed int32) {
	if p := s.player(slot); p != nil {
		p.Speed = max(speed, 0)
	}
}

// PlayerSpeed returns the speed, in quanta per second, the player in slot walks with
// now; 0 for a slot that holds no player.
func (s *State) PlayerSpeed(slot int32) int32 {
	if p := s.player(slot); p != nil {
		return s.speedOf(p)
	}
	return 0
}

// speedOf is the speed p walks with.
func (s *State) speedOf(p *Player) int32 {
	if p.Speed > 0 {
		return p.Speed
	}
	return s.opts.PlayerSpeed
}

// player returns the player in slot, or nil when slot holds none.
func (s *State) player(slot int32) *Player {
	if slot < 0 || int(slot) >= len(s.Entities) || s.Entities[slot].Kind != KindPlayer {
		return nil
	}
	return &s.Players[slot]
}

// Enqueue queues a player's inputs for the coming ticks, which walk them one per tick.
// Inputs whose seq is not above every seq queued before (duplicates, replays,
// reordering) are ignored, and so are inputs with a direction outside [-MaxDir, MaxDir]
// on an axis (int8 admits -128). Past the jitter buffer the oldest waiting inputs are
// dropped (counted), so a client that sends faster than the tick walks no faster and
// no later than the buffer. A frozen player's inputs are consumed (acked) without
// walking. It returns how many inputs were taken; 0 for a slot that holds no player.
func (s *State) Enqueue(slot int32, inputs []Input) int {
	p := s.player(slot)
	if p == nil {
		return 0
	}
	n := 0
	for _, in := range inputs {
		if in.Seq <= p.lastQueued || in.DX < -MaxDir || in.DY < -MaxDir {
			continue
		}
		p.lastQueued = in.Seq
		n++
		if p.Frozen {
			p.LastSeq = in.Seq
			continue
		}
		p.queued = append(p.queued, in)
	}
	if over := len(p.queued) - s.opts.JitterBuffer; over > 0 {
		s.shed(p, over)
	}
	return n
}

// shed drops the n oldest waiting inputs of p; the client sees them acked and its
// reconciliation replays what follows them.
func (s *State) shed(p *Player, n int) {
	p.LastSeq = max(p.LastSeq, p.queued[n-1].Seq)
	p.queued = p.queued[:copy(p.queued, p.queued[n:])]
	s.counters.InputsDropped += uint64(n)
}

// NewSession starts a fresh input sequence for the player in slot: a new connection
// took the character over (a second tab, a reload), and its inputs count from seq 1.
// Waiting inputs are discarded and the stride starts anew.
func (s *State) NewSession(slot int32) {
	if p := s.player(slot); p != nil {
		p.LastSeq, p.lastQueued, p.Stride, p.minQueued = 0, 0, Stride{}, 0
		p.queued = p.queued[:0]
	}
}

// Halt discards the player's waiting inputs: it stands still until new ones arrive.
func (s *State) Halt(slot int32) {
	if p := s.player(slot); p != nil {
		if len(p.queued) > 0 {
			p.LastSeq = p.queued[len(p.queued)-1].Seq
		}
		p.queued = p.queued[:0]
	}
}

// Freeze stops (on) or releases (off) the player in slot: frozen, it stands still and
// its inputs are consumed without walking, as while its transfer is in flight.
func (s *State) Freeze(slot int32, on bool) {
	if p := s.player(slot); p != nil {
		if on {
			s.Halt(slot)
		}
		p.Frozen = on
	}
}

// Step advances the state by one tick: each player walks its oldest waiting input (at
// most one a tick, so no player outruns its speed whatever its client sends), each NPC
// walks and turns on schedule (or chases the player it hunts), and players who entered
// a portal are reported. At the end of each drain window, inputs that waited through
// all of it are shed. The order is fixed: perception (every PerceptionEvery ticks) on
// the positions of the tick before, then every entity's movement in slot order.
func (s *State) Step() Events {
	s.tick++
	s.events = Events{Tick: s.tick, Portals: s.events.Portals[:0], Perception: s.events.Perception[:0]}
	hz := s.opts.TickHz
	drain := s.tick%uint64(s.opts.DrainWindow) == 0
	if s.tick%uint64(s.opts.PerceptionEvery) == 0 {
		s.perceive()
	}
	for i := range s.Entities {
		e := &s.Entities[i]
		switch e.Kind {
		case KindPlayer:
			s.stepPlayer(int32(i), e, drain)
		case KindNPC:
			if e.State == NPCChasing {
				s.chase(int32(i), e)
				continue
			}
			n := &s.npcs[i]
			if s.tick >= n.turnAt {
				s.turn(int32(i))
			}
			next := s.colliders.slide(e.Pos, Displacement(n.vx, s.tick, hz), Displacement(n.vy, s.tick, hz))
			if next == e.Pos {
				n.turnAt = s.tick + 1 // stuck: pick another direction next tick
			}
			e.Pos = next
		}
	}
	return s.events
}

// stepPlayer walks the player's oldest waiting input, keeps its drain window and
// detects a portal entry.
func (s *State) stepPlayer(slot int32, e *Entity, drain bool) {
	p := &s.Players[slot]
	if len(p.queued) > 0 && !p.Frozen {
		in := p.queued[0]
		e.Pos, p.Stride = Walk(s.colliders, e.Pos, p.Stride, in, s.speedOf(p), s.opts.TickHz)
		e.DX, e.DY = in.DX, in.DY
		if in.DX != 0 || in.DY != 0 {
			e.Facing = FacingOf(in.DX, in.DY)
		}
		p.LastSeq = in.Seq
		p.queued = p.queued[:copy(p.queued, p.queued[1:])]
	} else if len(p.queued) == 0 {
		e.DX, e.DY = 0, 0
	}
	if q := len(p.queued); q < p.minQueued || p.minQueued < 0 {
		p.minQueued = q
	}
	if drain {
		// One input a window at most: each shed input is one step the client's
		// prediction walked and the server did not, so one at a time keeps every
		// correction within a step.
		if p.minQueued > 1 {
			s.shed(p, 1)
		}
		p.minQueued = -1 // unset: the next tick starts the new window
	}
	at := s.portalAt(e.Pos)
	if at != 0 && at != p.portal {
		s.events.Portals = append(s.events.Portals, PortalEvent{Slot: slot, ID: e.ID, Portal: at - 1})
	}
	p.portal = at
}

// portalAt returns 1 + the index of the first portal whose trigger circle contains
// pos, or 0.
func (s *State) portalAt(pos Vec) int {
	x, y := int64(pos.X), int64(pos.Y)
	for i, pt := range s.portals {
		dx, dy := x-pt.x, y-pt.y
		if dx*dx+dy*dy <= pt.r*pt.r {
			return i + 1
		}
	}
	return 0
}
