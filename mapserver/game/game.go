// Package game is mapyard's reference game, one implementation of the game API
// (gameapi.Game, in api.go): the simulation (sim) with its players and NPCs, the
// area-of-interest grid (aoi) and the snapshot encoder (wire), the items of the map
// with their critical events (items.go and a file per command), equipment (equip.go)
// and the recovery of critical items (recovery.go), plus the bookkeeping between
// characters and simulation slots. Like the simulation it has no goroutines, no I/O and
// no clock; the tick goroutine owns it.
package game

import (
	"encoding/json"
	"math"

	"github.com/mapyard/mapyard/mapserver/aoi"
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// Area of interest (workload W1): 200-unit cells, and a cell is given up only 10 units
// past its edge, so a player walking along a border keeps one view.
const (
	CellSize = 200 * sim.QuantaPerUnit
	Margin   = 10 * sim.QuantaPerUnit
)

// Game is one map's dynamic world.
type Game struct {
	// NewEventID makes the id of each critical event the game starts
	// (gameapi.NewEventID); tests set their own.
	NewEventID func() string

	world *mapgen.World
	mapID string
	state *sim.State
	grid  *aoi.Grid
	enc   *wire.Encoder

	slots  map[string]int32 // character id → slot
	owners []string         // slot → character id ("" for NPCs and free slots)
	attrs  map[string]json.RawMessage
	guests map[string]bool // the disposable characters here, which hold no items
	// encoded is the simulation tick the encoder's current table holds.
	encoded  uint64
	began    bool
	visible  []int32
	items    itemState
	equip    equipState
	recovery recoveryState

	// viewCap bounds the entities of one snapshot (DefaultViewCap); cands and pinned
	// are capView's scratch, mark a bitset of slots capView and nearFar use and leave
	// clear, and later holds the events snapshots raised, which the next Step reports.
	viewCap int
	cands   []candidate
	pinned  []int32
	mark    []uint64
	later   []gameapi.Note
	// chases pairs each chased player's slot with the NPC chasing it, at chaseTick.
	chases     [][2]int32
	chaseTick  uint64
	chaseValid bool
	// views counts the views made, to stagger their reselection.
	views int
	// farRadius is the distance beyond which a view sees an entity from afar (how
	// often it then sees it move is the encoder's), viewNear how many a crowded view
	// sees near at most; keep is nearAlways's scratch, near and nearCands nearFar's.
	farRadius  int32
	viewNear   int
	keep, near []int32
	nearCands  []candidate
}

var _ gameapi.Game = (*Game)(nil)

// New builds the game of world w, generated from cfg, stepped tickHz times a second:
// NPCs from the config's density, seeded by its seed, and no item in the world until
// LoadItems (Build does both, with the orchestrator's answer).
func New(w *mapgen.World, cfg mapgen.MapConfig, tickHz int) (*Game, error) {
	st, err := sim.New(w, sim.Options{TickHz: tickHz, Seed: cfg.Seed, NPCs: sim.NPCCount(cfg.GenerationRules, w)})
	if err != nil {
		return nil, err
	}
	bw, bh := st.Colliders().Bounds()
	grid, err := aoi.New(bw, bh, CellSize, Margin)
	if err != nil {
		return nil, err
	}
	g := &Game{
		world: w, mapID: cfg.MapID, state: st, grid: grid, enc: wire.NewEncoder(wire.DefaultClientRing),
		slots: make(map[string]int32), attrs: make(map[string]json.RawMessage), guests: make(map[string]bool),
		items: newItemState(items.DefaultCatalog(), cfg.InstanceID), viewCap: DefaultViewCap,
		farRadius: DefaultFarRadius, viewNear: DefaultViewNear, NewEventID: gameapi.NewEventID,
	}
	g.items.seed = GenerateItems(cfg, w, st.Colliders(), g.items.catalog)
	g.place()
	g.SetSnapshotHz(max(tickHz/2, 1)) // the map's defaults: 15 Hz snapshots of 30 Hz ticks
	return g, nil
}

// SetSnapshotHz says how many snapshots a second each view is sent, which the kit
// builds at every tick for some of the views (gameapi.Setup): the encoder then samples
// distant entities so that each view sees them move once in wire.DefaultFarEvery of its
// own snapshots. Call it before the first snapshot.
func (g *Game) SetSnapshotHz(hz int) { g.enc.SetRates(g.state.Options().TickHz, hz) }

// Sim exposes the simulation, for tests and benchmarks that look inside.
func (g *Game) Sim() *sim.State { return g.state }

// Slot returns the simulation slot of a character, for tests and benchmarks that look
// inside.
func (g *Game) Slot(characterID string) (int32, bool) {
	slot, ok := g.slots[characterID]
	return slot, ok
}

// viewersOf returns the characters whose area of interest holds slot: the players of
// the 3 × 3 cells around it (the relation is symmetric).
func (g *Game) viewersOf(slot int32) []string {
	g.visible = g.grid.Query(slot, g.visible[:0])
	var out []string
	for _, s := range g.visible {
		if int(s) < len(g.owners) && g.owners[s] != "" {
			out = append(out, g.owners[s])
		}
	}
	return out
}

// npcStateFrame is the "npc_state" event of a perception change.
func npcStateFrame(p sim.PerceptionEvent) []byte {
	name := func(s uint8) string {
		if int(s) < len(wire.NPCStateNames) {
			return wire.NPCStateNames[s]
		}
		return "unknown"
	}
	b, _ := json.Marshal(wire.Event{V: wire.Version, Kind: wire.KindEvent, Name: "npc_state",
		Data: wire.NPCState{ID: uint64(p.ID), From: name(p.From), To: name(p.To), Target: uint64(p.Target)}})
	return b
}

// place puts every entity at its position in the grid.
func (g *Game) place() {
	for i := range g.state.Entities {
		if e := &g.state.Entities[i]; e.Kind != sim.KindNone {
			g.grid.Update(int32(i), e.Pos.X, e.Pos.Y)
		}
	}
}

// begin records every entity's state in the encoder once per simulation tick, at the
// first snapshot built for it; every client's frame then reads the shared table.
func (g *Game) begin() {
	t := g.state.Tick()
	if g.began && g.encoded == t {
		return
	}
	g.enc.Begin(uint32(t))
	for i := range g.state.Entities {
		if e := &g.state.Entities[i]; e.Kind != sim.KindNone {
			g.enc.Set(int32(i), wire.EntityState{
				ID: uint64(e.ID), Kind: uint8(e.Kind), X: e.Pos.X, Y: e.Pos.Y,
				Facing: e.Facing, State: e.State, Template: e.Template,
			})
		}
	}
	g.encoded, g.began = t, true
}

// view is one connection's replication state: the encoder's per-client baselines.
type view struct {
	g      *Game
	id     string
	client *wire.Client
	// kept is what the cap let the last selection show, sorted (empty when uncapped),
	// keptIDs their entities, countdown the snapshots until the next selection;
	// shown and inView the counts last reported to the client (if reported),
	// sinceReport the snapshots since.
	kept      []int32
	keptIDs   []sim.EntityID
	countdown int
	// near is what the last selection of the nearest showed near (see nearFar),
	// nearIDs their entities, nearCountdown the snapshots until the next selection.
	near          []int32
	nearIDs       []sim.EntityID
	nearCountdown int
	shown, inView int
	sinceReport   int
	reported      bool
}

// Snapshot encodes the current tick for the view's character: the entities of the 3x3
// cells around it (those beyond the far radius seen from afar), full or against its
// acknowledged baseline, with its last input seq.
func (v *view) Snapshot(dst []byte) ([]byte, bool) {
	g := v.g
	slot, ok := g.slots[v.id]
	if !ok {
		return dst, false
	}
	g.begin()
	// The slots live in the game's scratch (the grid query's buffer, or the cap's
	// selection), which the next view reuses: no view allocates its list.
	visible := v.viewSlots(slot)
	if near, ok := v.nearFar(slot, visible); ok {
		return g.enc.EncodeFar(dst, v.client, g.state.Players[slot].LastSeq, slot, near, visible)
	}
	return g.enc.EncodeWithin(dst, v.client, g.state.Players[slot].LastSeq, slot, visible, g.farRadius, g.nearAlways(slot))
}

// Ack records the newest snapshot tick the client decoded.
func (v *view) Ack(tick uint64) {
	if tick <= math.MaxUint32 {
		v.client.Ack(uint32(tick))
	}
}

func toQuanta(units float64) int32 {
	return int32(math.Round(units * sim.QuantaPerUnit))
}
