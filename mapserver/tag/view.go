package tag

import (
	"math"

	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// baseID is the entity id of base i: far above the simulation's ids, which count from 1.
func baseID(i int) uint64 { return 1<<40 + uint64(i) }

// Welcome starts a connection's view: the whole arena, every snapshot (it is small).
func (g *Game) Welcome(characterID string) gameapi.Welcome {
	return gameapi.Welcome{View: &view{g: g, id: characterID, client: wire.NewClient(wire.DefaultClientRing)}}
}

// view is one connection's replication state: the encoder's baselines of its client.
type view struct {
	g      *Game
	id     string
	client *wire.Client
}

// Snapshot encodes the arena for the view's character: the bases (zones, their radius
// as template), then every player, the one who is it marked and those who cannot be
// tagged shielded.
func (v *view) Snapshot(dst []byte) ([]byte, bool) {
	g := v.g
	p := g.players[v.id]
	if p == nil {
		return dst, false
	}
	g.table()
	return g.enc.Encode(dst, v.client, g.sim.Players[p.slot].LastSeq, int32(len(g.bases))+p.slot, g.all)
}

// Ack records the newest snapshot tick the client decoded.
func (v *view) Ack(tick uint64) {
	if tick <= math.MaxUint32 {
		v.client.Ack(uint32(tick))
	}
}

// table records every entity in the encoder once per tick, at the first snapshot built
// for it: bases in the first wire slots, players after them in their simulation slots.
func (g *Game) table() {
	t := g.sim.Tick()
	if g.began && g.encoded == t {
		return
	}
	g.encoded, g.began = t, true
	g.enc.Begin(uint32(t))
	g.all = g.all[:0]
	for i, b := range g.bases {
		g.enc.Set(int32(i), wire.EntityState{ID: baseID(i), Kind: wire.EntityZone, X: b.X, Y: b.Y,
			Template: uint32(sim.ToCentimetres(BaseRadius))})
		g.all = append(g.all, int32(i))
	}
	for _, p := range g.players {
		e := &g.sim.Entities[p.slot]
		var flags uint8
		if p.id == g.it {
			flags |= wire.PlayerMarked
		}
		if g.shielded(p) {
			flags |= wire.PlayerShielded
		}
		slot := int32(len(g.bases)) + p.slot
		g.enc.Set(slot, wire.EntityState{ID: uint64(e.ID), Kind: wire.EntityPlayer, X: e.Pos.X, Y: e.Pos.Y, Facing: e.Facing, State: flags})
		g.all = append(g.all, slot)
	}
}
