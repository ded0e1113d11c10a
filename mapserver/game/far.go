package game

import (
	"slices"

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

// DefaultViewNear is how many of a crowded view's entities a player sees near however
// close the rest stand: the nearest ones, plus itself and whatever chases it or trades
// with it. The others in the far radius are seen from afar like distant ones (their
// movement once every wire.DefaultFarEvery snapshots). A moving crowd of a thousand in
// one spot fills every view to its cap (DefaultViewCap) with entities that all move, so
// without this each client is sent every one of them moving on every snapshot; with it,
// about a third of that. Thirty-two is the people a player can tell apart around it on
// the page's screen, several times the few units it acts within.
const DefaultViewNear = 32

// SetViewNear sets how many entities of a view are seen near at most, the nearest
// (DefaultViewNear at first); n <= 0 shows every entity in the far radius near.
func (g *Game) SetViewNear(n int) { g.viewNear = n }

// SetFarRadius sets the distance in quanta beyond which a player sees an entity from
// afar (DefaultFarRadius at first); r <= 0 shows every entity near.
func (g *Game) SetFarRadius(r int32) { g.farRadius = r }

// nearFar returns the slots of self's snapshot that self sees near, when its view
// (visible) holds more than viewNear entities and there is a far rule (FarView): itself,
// the pinned ones and the viewNear nearest of those in the far radius (by distance, then
// slot), the others of visible seen from afar (the encoder takes visible as the far
// list: a slot in both lists is near). The nearest are selected again every
// reselectEvery snapshots, as a capped view's are, and kept in between (those still in
// their slots): a crowd reorders slowly, and a selection costs a pass over the view.
// ok is false when the rule does not apply and every slot in the far radius is near.
func (v *view) nearFar(self int32, visible []int32) (near []int32, ok bool) {
	g := v.g
	if g.viewNear <= 0 || len(visible) <= g.viewNear || !g.farRule() {
		v.near, v.nearIDs = v.near[:0], v.nearIDs[:0]
		return nil, false
	}
	st := g.state
	// Only what the snapshot shows is near: what chases the player may stand outside
	// its view, and a kept entity may have left it (or the cap's selection) since.
	// The view's slots are marked in capView's bitset, clear outside its calls.
	if words := (len(st.Entities) + 63) / 64; len(g.mark) < words {
		g.mark = make([]uint64, words)
	}
	for _, s := range visible {
		g.mark[s>>6] |= 1 << (s & 63)
	}
	shown := func(s int32) bool { return g.mark[s>>6]&(1<<(s&63)) != 0 }
	near = g.near[:0]
	for _, s := range append(g.nearAlways(self), self) {
		if shown(s) {
			near = append(near, s)
		}
	}
	if len(v.near) > 0 && v.nearCountdown > 0 {
		v.nearCountdown--
		for i, s := range v.near {
			if int(s) < len(st.Entities) && st.Entities[s].ID == v.nearIDs[i] && shown(s) {
				near = append(near, s)
			}
		}
	} else {
		near = v.selectNear(self, visible, near)
	}
	for _, s := range visible {
		g.mark[s>>6] = 0
	}
	g.near = near
	return near, true
}

// selectNear appends to near (the pinned and self) the viewNear nearest others of
// visible in the far radius, by distance then slot, and keeps them in v.near until the
// next selection, reselectEvery snapshots on.
func (v *view) selectNear(self int32, visible, near []int32) []int32 {
	g, st := v.g, v.g.state
	v.nearCountdown = reselectEvery - 1
	me := st.Entities[self].Pos
	c := g.nearCands[:0]
	r2 := int64(g.farRadius) * int64(g.farRadius)
	for _, s := range visible {
		if slices.Contains(near, s) {
			continue
		}
		p := st.Entities[s].Pos
		dx, dy := int64(p.X-me.X), int64(p.Y-me.Y)
		if d2 := dx*dx + dy*dy; d2 <= r2 {
			c = append(c, newCandidate(d2, s))
		}
	}
	if k := max(g.viewNear-len(near), 0); k < len(c) {
		nearest(c, k)
		c = c[:k]
	}
	v.near, v.nearIDs = v.near[:0], v.nearIDs[:0]
	for _, x := range c {
		s := x.slot()
		near = append(near, s)
		v.near = append(v.near, s)
		v.nearIDs = append(v.nearIDs, st.Entities[s].ID)
	}
	g.nearCands = c
	return near
}

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

// farRule reports whether some entities are seen from afar (FarView is not nil),
// without FarView's allocation: nearFar asks on every snapshot.
func (g *Game) farRule() bool { return g.farRadius > 0 && g.enc.FarEvery() > 1 }

// FarView is the far rule welcomes announce; nil when every entity is near.
func (g *Game) FarView() *wire.FarView {
	if !g.farRule() {
		return nil
	}
	return &wire.FarView{Radius: float64(g.farRadius) / sim.QuantaPerUnit, Every: g.enc.FarEvery(), Nearest: max(g.viewNear, 0)}
}
