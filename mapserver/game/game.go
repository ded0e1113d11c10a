// Package game puts the pure packages together into the game the tick loop drives: the
// simulation (sim) with its players and NPCs, the area-of-interest grid (aoi) and the
// snapshot encoder (wire), plus the bookkeeping between characters and simulation
// slots. Like the simulation it has no goroutines, no I/O and no clock; the tick
// goroutine owns it.
package game

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/mapyard/mapyard/mapserver/aoi"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/loop"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// Area of interest (workload W1): 200-unit cells, and a cell is given up only 10 units
// past its edge, so a player walking along a border keeps one view.
const (
	CellSize = 200 * sim.QuantaPerUnit
	Margin   = 10 * sim.QuantaPerUnit
)

// Game is one map's dynamic world as the loop sees it.
type Game struct {
	world *mapgen.World
	mapID string
	state *sim.State
	grid  *aoi.Grid
	enc   *wire.Encoder

	slots  map[string]int32 // character id → slot
	owners []string         // slot → character id ("" for NPCs and free slots)
	attrs  map[string]json.RawMessage
	// encoded is the simulation tick the encoder's current table holds.
	encoded  uint64
	began    bool
	visible  []int32
	events   []loop.Event
	items    itemState
	equip    equipState
	recovery recoveryState

	// viewCap bounds the entities of one snapshot (DefaultViewCap); cands and pinned
	// are capView's scratch, and later holds the events snapshots raised, which the
	// next Step reports.
	viewCap int
	cands   []candidate
	pinned  []int32
	mark    []uint64
	later   []loop.Event
	// chases pairs each chased player's slot with the NPC chasing it, at chaseTick.
	chases     [][2]int32
	chaseTick  uint64
	chaseValid bool
	// views counts the views made, to stagger their reselection.
	views int
	// farRadius is the distance beyond which a view sees an entity from afar (how
	// often it then sees it move is the encoder's); keep is nearAlways's scratch.
	farRadius int32
	keep      []int32
}

var (
	_ loop.Game          = (*Game)(nil)
	_ loop.SnapshotPaced = (*Game)(nil)
	_ loop.Named         = (*Game)(nil)
)

// New builds the game of world w, generated from cfg, stepped tickHz times a second:
// NPCs from the config's density, seeded by its seed.
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
		slots: make(map[string]int32), attrs: make(map[string]json.RawMessage),
		items: newItemState(items.DefaultCatalog(), cfg.InstanceID), viewCap: DefaultViewCap,
		farRadius: DefaultFarRadius,
	}
	g.items.seed = GenerateItems(cfg, w, st.Colliders(), g.items.catalog)
	g.place()
	g.SetSnapshotHz(max(tickHz/2, 1)) // the map's defaults: 15 Hz snapshots of 30 Hz ticks
	return g, nil
}

// SetSnapshotHz says how many snapshots a second each view is sent, which the loop
// builds at every tick for some of the views (see loop.Loop): the encoder then samples
// distant entities so that each view sees them move once in wire.DefaultFarEvery of its
// own snapshots. Call it before the first snapshot.
func (g *Game) SetSnapshotHz(hz int) { g.enc.SetRates(g.state.Options().TickHz, hz) }

// Factory is New as the app's game factory.
func Factory(w *mapgen.World, cfg mapgen.MapConfig, tickHz int) (loop.Game, error) {
	return New(w, cfg, tickHz)
}

// State exposes the simulation, for tests and benchmarks that look inside.
func (g *Game) Sim() *sim.State { return g.state }

// Slot returns the simulation slot of a character, for tests and benchmarks that look
// inside.
func (g *Game) Slot(characterID string) (int32, bool) {
	slot, ok := g.slots[characterID]
	return slot, ok
}

// EntityOf returns the entity id snapshots show a character under, so that the loop
// can tell players its name.
func (g *Game) EntityOf(characterID string) (uint64, bool) {
	slot, ok := g.slots[characterID]
	if !ok {
		return 0, false
	}
	return uint64(g.state.Entities[slot].ID), true
}

// Decode decodes a command payload; it touches no game state, so connections call it
// concurrently. Movement input batches become []sim.Input, item commands Pickup.
func (g *Game) Decode(feature, action string, payload json.RawMessage) (any, error) {
	if feature == FeatureItems {
		return decodeItems(action, payload)
	}
	if feature == FeatureEquipment {
		return decodeEquipment(action, payload)
	}
	if feature == wire.FeatureMovement && action == wire.ActionInputBatch {
		in, err := wire.DecodeInputBatch(payload, nil)
		if err != nil {
			var we *wire.Error
			if errors.As(err, &we) {
				return nil, apierr.Errorf(we.Code, "%s", we.Message)
			}
			return nil, apierr.Errorf(wire.CodeBadPayload, "%v", err)
		}
		return in, nil
	}
	return nil, apierr.Errorf(wire.CodeUnknownCommand, "unknown command %.32q/%.32q", feature, action)
}

// Spawn adds a character where ArrivalPointOf puts it: its saved position on
// this map, next to the portal leading back where it came from, or a spawn point. The
// attributes it carries stay with it untouched.
func (g *Game) Spawn(characterID string, st *record.CharacterState) error {
	if _, ok := g.slots[characterID]; ok {
		return fmt.Errorf("character %q is already in the world", characterID)
	}
	a := ArrivalPointOf(g.world, g.mapID, characterID, st)
	pos := sim.Vec{X: toQuanta(a.X), Y: toQuanta(a.Y)}
	slot, _ := g.state.AddPlayer(sim.PlayerState{Pos: pos})
	for int(slot) >= len(g.owners) {
		g.owners = append(g.owners, "")
	}
	g.owners[slot] = characterID
	g.slots[characterID] = slot
	if st != nil && len(st.Attributes) > 0 {
		g.attrs[characterID] = st.Attributes
		g.rememberEquipment(characterID, st.Attributes)
	}
	e := g.state.Entities[slot]
	g.grid.Update(slot, e.Pos.X, e.Pos.Y)
	return nil
}

// Apply queues a character's movement inputs (inputs it already has are ignored), or
// applies an item command that changes no owner (a trade offer, a decline).
func (g *Game) Apply(characterID string, cmd any) error {
	slot, ok := g.slots[characterID]
	if !ok {
		return apierr.Errorf(apierr.ENOTFOUND, "no such character")
	}
	if mine, err := g.applyItems(characterID, cmd); mine {
		return err
	}
	in, ok := cmd.([]sim.Input)
	if !ok {
		return apierr.Errorf(wire.CodeUnknownCommand, "unknown command")
	}
	g.state.Enqueue(slot, in)
	return nil
}

// Stop discards a character's waiting inputs: it stands still until new ones come.
func (g *Game) Stop(characterID string) {
	if slot, ok := g.slots[characterID]; ok {
		g.state.Halt(slot)
	}
}

// NewSession starts a fresh input sequence for a character a new connection took
// over: its inputs count from seq 1 and walk at once.
func (g *Game) NewSession(characterID string) {
	if slot, ok := g.slots[characterID]; ok {
		g.state.NewSession(slot)
		g.equip.newSession(characterID)
	}
}

// Hold freezes a character in place (on) while its transfer is in flight, or releases
// it (off) when the transfer was denied.
func (g *Game) Hold(characterID string, on bool) {
	if slot, ok := g.slots[characterID]; ok {
		g.state.Freeze(slot, on)
	}
}

// InputsDropped counts the movement inputs the simulation never walked (past the
// jitter buffer, or shed as a standing delay) since the game began.
func (g *Game) InputsDropped() uint64 { return g.state.Counters().InputsDropped }

// Step advances the simulation one tick, moves everything in the grid, runs the
// critical-item recovery pass at maintenance boundaries (recovery.go; its events are
// collected with Recoveries) and reports the portals players entered, perception
// changes, what the last snapshots raised, and trade and inventory events.
func (g *Game) Step() []loop.Event {
	ev := g.state.Step()
	g.place()
	g.maintain()
	g.events = g.events[:0]
	for _, p := range ev.Portals {
		if int(p.Slot) < len(g.owners) && g.owners[p.Slot] != "" && p.Portal < len(g.world.Portals) {
			g.events = append(g.events, loop.Event{CharacterID: g.owners[p.Slot], Portal: g.world.Portals[p.Portal]})
		}
	}
	for _, p := range ev.Perception {
		if viewers := g.viewersOf(p.Slot); len(viewers) > 0 {
			g.events = append(g.events, loop.Event{Frame: npcStateFrame(p), Viewers: viewers})
		}
	}
	g.events = append(g.events, g.later...)
	clear(g.later)
	g.later = g.later[:0]
	g.events = g.inventoryEvents(g.events)
	return g.events
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

// State is a character's position in units (metres) and its attributes, with its
// current equipment under "equipment" once the game knows it (equip.go).
func (g *Game) State(characterID string) (record.CharacterState, bool) {
	slot, ok := g.slots[characterID]
	if !ok {
		return record.CharacterState{}, false
	}
	p := g.state.Entities[slot].Pos
	return record.CharacterState{
		CharacterID: characterID, MapID: g.mapID,
		X: float64(p.X) / sim.QuantaPerUnit, Y: float64(p.Y) / sim.QuantaPerUnit, Attributes: g.withEquipment(characterID, g.attrs[characterID]),
	}, true
}

// Despawn removes a character.
func (g *Game) Despawn(characterID string) {
	slot, ok := g.slots[characterID]
	if !ok {
		return
	}
	g.state.RemovePlayer(slot)
	g.grid.Remove(slot)
	g.owners[slot] = ""
	delete(g.slots, characterID)
	delete(g.attrs, characterID)
	delete(g.items.inv, characterID)
	g.expireTrades(characterID)
	g.equip.forget(characterID)
}

// Entities counts players, NPCs and items in the world.
func (g *Game) Entities() int {
	return g.state.PlayerCount() + g.state.NPCCount() + g.state.ItemCount()
}

// instanceState is the payload of the instance partition: the tick and where every
// NPC stands and walks, in quanta.
type instanceState struct {
	MapID string     `json:"mapId"`
	Tick  uint64     `json:"tick"`
	NPCs  [][5]int64 `json:"npcs"` // id, x, y, dx, dy
}

// InstanceState returns the instance partition's payload.
func (g *Game) InstanceState() json.RawMessage {
	st := instanceState{MapID: g.mapID, Tick: g.state.Tick(), NPCs: make([][5]int64, 0, g.state.NPCCount())}
	for i := range g.state.Entities {
		if e := &g.state.Entities[i]; e.Kind == sim.KindNPC {
			st.NPCs = append(st.NPCs, [5]int64{int64(e.ID), int64(e.Pos.X), int64(e.Pos.Y), int64(e.DX), int64(e.DY)})
		}
	}
	b, err := json.Marshal(st)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}

// NewView starts one connection's replication of a character: its first snapshot is
// full.
func (g *Game) NewView(characterID string) loop.View {
	g.views++
	return &view{g: g, id: characterID, client: wire.NewClient(wire.DefaultClientRing), countdown: g.views % reselectEvery}
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
	kept          []int32
	keptIDs       []sim.EntityID
	countdown     int
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
