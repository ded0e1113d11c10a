package game

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// This file is the reference game as the game API sees it: every method of
// gameapi.Game, each handing its work to the file of its concern.

// Options are the reference game's tunables that a host sets (mapenv: MAP_VIEW_CAP,
// MAP_RECOVERY_EVERY_TICKS).
type Options struct {
	// ViewCap bounds the entities one snapshot shows (DefaultViewCap; 0: no cap).
	ViewCap int
	// ViewNear is how many of a crowded view's entities are seen near
	// (DefaultViewNear; 0: all within the far radius).
	ViewNear int
	// RecoveryEveryTicks is the critical-item recovery pass's period in ticks (0:
	// never).
	RecoveryEveryTicks uint64
}

// ItemLoadLimit bounds how long a starting map waits for its items' ownership state.
const ItemLoadLimit = 15 * time.Second

// Build returns the game API's constructor of the reference game with o: New, the
// rates of s, then the items of the instance (LoadItems, LoadRecovery) from the
// orchestrator's answer to the items the generator placed.
func Build(o Options) gameapi.New {
	return func(s gameapi.Setup) (gameapi.Game, error) {
		g, err := New(s.World, s.Config, s.TickHz)
		if err != nil {
			return nil, err
		}
		g.SetSnapshotHz(s.SnapshotHz)
		g.SetViewCap(o.ViewCap)
		g.SetViewNear(o.ViewNear)
		g.loadInstanceItems(s, o.RecoveryEveryTicks)
		return g, nil
	}
}

// loadInstanceItems seeds the items the generator placed at the orchestrator and puts
// in the world those the orchestrator says still lie here, so a restarted map never
// places an item a player took. Without the orchestrator's answer the map places none:
// it never guesses who owns what.
func (g *Game) loadInstanceItems(s gameapi.Setup, recoveryEvery uint64) {
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if s.Orchestrator == nil {
		return
	}
	ctx := s.Context
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, ItemLoadLimit)
	defer cancel()
	a, err := s.Orchestrator.InstanceItems(ctx, mapcontract.InstanceItemsRequest{InstanceID: s.Config.InstanceID, Seed: g.ItemSeed()})
	if err != nil {
		log.Error("load instance items; the world has none", "err", err)
		return
	}
	g.LoadItems(a.Items)
	g.LoadRecovery(a.Policies, a.Items, recoveryEvery)
	log.Info("instance items loaded", "seeded", len(g.ItemSeed()), "owned", len(a.Items), "policies", len(a.Policies))
}

// Decode decodes a command payload; it touches no game state, so connections call it
// concurrently. Movement input batches become []sim.Input, item commands Pickup, Drop,
// Offer, Accept, Decline or Consume, equipment commands Equip or Unequip.
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

// Join adds a character where ArrivalPointOf puts it (its saved position on this map,
// next to the portal leading back where it came from, or a spawn point) with the
// attributes it carries, untouched, and the items the orchestrator says it holds (its
// inventory, and its equipment restored from its attributes).
func (g *Game) Join(a gameapi.Arrival) (uint64, error) {
	if err := g.spawn(a.CharacterID, a.State); err != nil {
		return 0, err
	}
	if a.Guest {
		g.guests[a.CharacterID] = true
	}
	g.carry(a.CharacterID, a.Items)
	return uint64(g.state.Entities[g.slots[a.CharacterID]].ID), nil
}

// spawn adds a character to the simulation and the grid.
func (g *Game) spawn(characterID string, st *record.CharacterState) error {
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

// Leave removes a character, its inventory as the map knew it and its open offers.
func (g *Game) Leave(characterID string) {
	slot, ok := g.slots[characterID]
	if !ok {
		return
	}
	g.state.RemovePlayer(slot)
	g.grid.Remove(slot)
	g.owners[slot] = ""
	delete(g.slots, characterID)
	delete(g.attrs, characterID)
	delete(g.guests, characterID)
	delete(g.items.inv, characterID)
	g.expireTrades(characterID)
	g.equip.forget(characterID)
}

// Presence halts a character whose connection is gone (its waiting inputs are
// discarded: it stands still until new ones come), starts a fresh input sequence for
// one a new connection took over (its inputs count from seq 1 and walk at once, its
// equipment seqs too), and freezes one whose transfer is in flight until it is freed.
func (g *Game) Presence(characterID string, p gameapi.Presence) {
	slot, ok := g.slots[characterID]
	if !ok {
		return
	}
	switch p {
	case gameapi.Away:
		g.state.Halt(slot)
	case gameapi.Fresh:
		g.state.Freeze(slot, false)
		g.state.NewSession(slot)
		g.equip.newSession(characterID)
	case gameapi.Held:
		g.state.Freeze(slot, true)
	case gameapi.Freed:
		g.state.Freeze(slot, false)
	}
}

// Command applies a character's command: movement inputs are queued (inputs it already
// has are ignored; snapshots acknowledge them); an equipment command is answered with
// its "equip_result" event (equip.go); an item command that changes an owner (pickup,
// drop, an accepted trade, consume) becomes a critical event (items.go); an offer or a
// decline is applied at once.
func (g *Game) Command(characterID string, seq uint64, cmd any, out gameapi.Out) gameapi.Reply {
	if _, ok := g.slots[characterID]; !ok {
		return gameapi.Reply{Err: apierr.Errorf(apierr.ENOTFOUND, "no such character")}
	}
	switch c := cmd.(type) {
	case []sim.Input:
		g.state.Enqueue(g.slots[characterID], c)
		return gameapi.Reply{Quiet: true}
	case Equip, Unequip:
		if frame, changed := g.equipCommand(characterID, seq, cmd); frame != nil {
			out.Notify(frame, []string{characterID})
			if changed {
				// Equipment lives only in the character's state: pushed now, a crash
				// rolls it back no further than a critical event, not a whole push
				// period.
				out.Save(characterID)
			}
		}
		return gameapi.Reply{Quiet: true}
	case Pickup, Drop, Accept, Consume:
		ev, err := g.beginItem(characterID, g.NewEventID(), cmd)
		if err != nil {
			return gameapi.Reply{Err: ruleRefusal(err)}
		}
		return gameapi.Reply{Critical: ev}
	case Offer:
		return gameapi.Reply{Err: g.offer(characterID, c)}
	case Decline:
		return gameapi.Reply{Err: g.decline(characterID, c)}
	}
	return gameapi.Reply{Err: apierr.Errorf(wire.CodeUnknownCommand, "unknown command")}
}

// Settle ends a critical event with the orchestrator's answer: an item command's
// (items.go: the refusal becomes a code and a sentence for players, never the
// orchestrator's words) or a recovery's (recovery.go).
func (g *Game) Settle(eventID string, answer error, out gameapi.Out) error {
	if _, ok := g.recovery.actions[eventID]; ok {
		if n := g.recovered(eventID, answer); n.Frame != nil {
			out.Notify(n.Frame, n.CharacterIDs)
		}
		return nil
	}
	if answer != nil {
		answer = orchestratorRefusal(answer)
	}
	n, err := g.settleItem(eventID, answer)
	if err == nil && n.Frame != nil {
		out.Notify(n.Frame, n.CharacterIDs)
	}
	return err
}

// Step advances the simulation one tick, moves everything in the grid, runs the
// critical-item recovery pass at maintenance boundaries (recovery.go) and reports the
// portals players entered, perception changes, what the last snapshots raised, and
// trade and inventory events.
func (g *Game) Step(out gameapi.Out) {
	ev := g.state.Step()
	g.place()
	g.maintain(out)
	for _, p := range ev.Portals {
		if int(p.Slot) < len(g.owners) && g.owners[p.Slot] != "" && p.Portal < len(g.world.Portals) {
			out.Portal(g.owners[p.Slot], g.world.Portals[p.Portal])
		}
	}
	for _, p := range ev.Perception {
		if viewers := g.viewersOf(p.Slot); len(viewers) > 0 {
			out.Notify(npcStateFrame(p), viewers)
		}
	}
	for _, n := range g.later {
		out.Notify(n.Frame, n.CharacterIDs)
	}
	clear(g.later)
	g.later = g.later[:0]
	g.inventoryEvents(out)
}

// Welcome starts one connection's replication of a character (its first snapshot is
// full), announces the far rule, and follows the welcome with the character's
// "inventory" event.
func (g *Game) Welcome(characterID string) gameapi.Welcome {
	g.views++
	return gameapi.Welcome{
		View:    &view{g: g, id: characterID, client: wire.NewClient(wire.DefaultClientRing), countdown: g.views % reselectEvery, nearCountdown: g.views % reselectEvery},
		FarView: g.FarView(),
		After:   [][]byte{g.InventoryFrame(characterID)},
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

// Stats counts players, NPCs and items in the world, and the movement inputs the
// simulation never walked (past the jitter buffer, or shed as a standing delay).
func (g *Game) Stats() gameapi.Stats {
	return gameapi.Stats{
		Entities:      g.state.PlayerCount() + g.state.NPCCount() + g.state.ItemCount(),
		InputsDropped: g.state.Counters().InputsDropped,
	}
}
