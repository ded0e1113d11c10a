package game

import (
	"slices"

	"github.com/mapyard/mapyard/mapserver/loop"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

var _ loop.FarViewer = (*Game)(nil)

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

// split divides visible, the slots of self's snapshot, into those self sees near and
// those it sees from afar: beyond the far radius, but never itself, the NPCs chasing it
// or its trade partners, whatever their distance.
func (g *Game) split(self int32, visible []int32) (near, far []int32) {
	near, far = g.near[:0], g.far[:0]
	if g.farRadius <= 0 {
		return visible, nil
	}
	st := g.state
	me := st.Entities[self].Pos
	r2 := int64(g.farRadius) * int64(g.farRadius)
	g.keep = g.pinnedOf(self, append(g.keep[:0], self))
	for _, s := range visible {
		p := st.Entities[s].Pos
		dx, dy := int64(p.X-me.X), int64(p.Y-me.Y)
		if dx*dx+dy*dy > r2 && !slices.Contains(g.keep, s) {
			far = append(far, s)
		} else {
			near = append(near, s)
		}
	}
	g.near, g.far = near, far
	return near, far
}

// SetFarEvery sets how many snapshots apart a view sees the movement of what it sees
// from afar (wire.DefaultFarEvery at first).
func (g *Game) SetFarEvery(k int) {
	g.enc.SetFarEvery(k)
	g.farEvery = max(k, 1)
}

// FarView is the far rule welcomes announce; nil when every entity is near.
func (g *Game) FarView() *wire.FarView {
	if g.farRadius <= 0 || g.farEvery <= 1 {
		return nil
	}
	return &wire.FarView{Radius: float64(g.farRadius) / sim.QuantaPerUnit, Every: g.farEvery}
}
