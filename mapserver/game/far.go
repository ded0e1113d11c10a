package game

import (
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// DefaultFarRadius is the distance beyond which a player sees an entity from afar: its
// movement reaches the player once every wire.DefaultFarEvery snapshots (1.25 times a
// second) instead of every snapshot, everything else about it at once. 60 units is
// twelve seconds of walking and four NPC sight ranges, while what a player acts on is
// within a few units (a pickup reaches 2, a trade 4). On W1's map an idle player sees
// about one in twenty of its 3x3 cells' entities nearer than that, so what it is sent
// of wandering NPCs falls to about a sixth; a crowd in one spot is all near and costs
// what it did.
const DefaultFarRadius = 60 * sim.QuantaPerUnit

// SetFarRadius sets the distance in quanta beyond which a player sees an entity from
// afar (DefaultFarRadius at first); r <= 0 shows every entity near.
func (g *Game) SetFarRadius(r int32) { g.farRadius = r }

// nearAlways returns what self sees near whatever the distance: the NPCs chasing it and
// the players it trades with (itself is at distance 0).
func (g *Game) nearAlways(self int32) []int32 {
	if g.farRadius <= 0 {
		return nil
	}
	g.keep = g.pinnedOf(self, g.keep[:0])
	return g.keep
}

// SetFarEvery sets how many snapshots apart a view sees the movement of what it sees
// from afar (wire.DefaultFarEvery at first).
func (g *Game) SetFarEvery(k int) { g.enc.SetFarEvery(k) }

// FarView is the far rule welcomes announce; nil when every entity is near.
func (g *Game) FarView() *wire.FarView {
	if g.farRadius <= 0 || g.enc.FarEvery() <= 1 {
		return nil
	}
	return &wire.FarView{Radius: float64(g.farRadius) / sim.QuantaPerUnit, Every: g.enc.FarEvery()}
}
