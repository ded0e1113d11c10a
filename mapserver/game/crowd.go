package game

import (
	"encoding/json"
	"math/bits"
	"slices"

	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// DefaultViewCap is how many entities one client's snapshot shows at most. A player in
// a crowd sees the nearest ones; the rest of its 3x3 cells are left out, so what a client
// costs the map (classifying and encoding its view) and the wire stays bounded however
// many players gather in one spot. W1's spread-out players see 25 to 95 entities, under
// the cap.
const DefaultViewCap = 128

// Hysteresis of the cap: an entity shown in the client's previous snapshot competes as
// if it stood at 4/5 of its distance (16/25 of the squared distance), so a crowd
// shuffling about the cap's edge does not swap who is shown on every snapshot (each swap
// costs a despawn and a spawn record).
const (
	keptNum = 16
	keptDen = 25
)

// viewCappedEvery is how many snapshots apart a client hears of a change in how many
// entities its cap leaves out, at most: one second at 15 snapshots per second.
const viewCappedEvery = 15

// ViewCapped is the Data of a "view_capped" event: the client's view holds InView
// entities and its snapshots show Shown of them (the nearest, plus itself and whatever
// chases it). Shown equals InView when the view is under the cap again.
type ViewCapped struct {
	Shown  int `json:"shown"`
	InView int `json:"inView"`
}

// SetViewCap sets how many entities one snapshot shows at most (DefaultViewCap at
// first); n <= 0 lifts the cap.
func (g *Game) SetViewCap(n int) { g.viewCap = n }

// candidate is an entity competing for a place in a capped view: its squared distance
// (as the hysteresis scales it) above candidateSlotBits, its slot below. One integer
// orders candidates by distance, then slot, with a single comparison, which is most of
// the cost of choosing the nearest among a crowd's thousand.
type candidate uint64

// candidateSlotBits holds a slot; a squared distance keeps the 40 bits above (a
// distance of about 65,000 units), farther ones tie at the top and go by slot.
const (
	candidateSlotBits = 24
	maxCandidateD2    = 1<<(64-candidateSlotBits) - 1
)

func newCandidate(d2 int64, slot int32) candidate {
	return candidate(uint64(min(max(d2, 0), maxCandidateD2))<<candidateSlotBits | uint64(slot))
}

func (c candidate) slot() int32 { return int32(c & (1<<candidateSlotBits - 1)) }

// reselectEvery is how many snapshots a capped view keeps the entities it selected
// before it queries its cells and selects again (half a second at 15 snapshots per
// second). Selecting costs a pass over every entity of the 3x3 cells; in between, a
// capped view costs only its cap. Views are staggered, so each snapshot reselects about
// one capped view in reselectEvery. A newcomer next to the player shows within that
// half second; an NPC that starts chasing the player shows at once.
const reselectEvery = 8

// viewSlots returns the slots of self's snapshot: every entity of its 3x3 cells while
// they hold no more than the cap, else what capView selected, refreshed every
// reselectEvery snapshots, plus the NPCs chasing self now.
func (v *view) viewSlots(self int32) []int32 {
	g := v.g
	v.sinceReport++
	if len(v.kept) > 0 && v.countdown > 0 && g.viewCap > 0 {
		v.countdown--
		out := g.visible[:0]
		st := g.state
		for i, s := range v.kept {
			if int(s) < len(st.Entities) && st.Entities[s].ID == v.keptIDs[i] {
				out = append(out, s)
			}
		}
		// An NPC that started chasing the player takes a place at once: if the view is
		// then over its cap, it selects again now.
		if out = g.pinnedOf(self, out); len(out) <= g.viewCap {
			return out
		}
	}
	visible := g.grid.Query(self, g.visible[:0])
	g.visible = visible // the grid query's buffer, kept at the size a crowd needs
	if g.viewCap <= 0 || len(visible) <= g.viewCap {
		v.kept, v.keptIDs = v.kept[:0], v.keptIDs[:0]
		v.report(len(visible), len(visible))
		return visible
	}
	v.countdown = reselectEvery - 1
	return v.capView(visible, self)
}

// capView cuts visible, the slots of self's 3x3 cells, to the view cap: self, the
// NPCs chasing it and its trade partners always, then the nearest others, those shown last time favoured by
// the hysteresis. It records what it kept in v.kept and reports a change of the count
// left out to the client (at most once per viewCappedEvery snapshots).
func (v *view) capView(visible []int32, self int32) []int32 {
	g := v.g
	st := g.state
	inView := len(visible)
	me := st.Entities[self].Pos
	// Mark what the last selection kept, for the hysteresis.
	if words := (len(st.Entities) + 63) / 64; len(g.mark) < words {
		g.mark = make([]uint64, words)
	}
	for _, s := range v.kept {
		g.mark[s>>6] |= 1 << (s & 63)
	}
	out := g.pinnedOf(self, append(g.pinned[:0], self))
	c := g.cands[:0]
	for _, s := range visible {
		if slices.Contains(out, s) {
			continue
		}
		p := st.Entities[s].Pos
		dx, dy := int64(p.X-me.X), int64(p.Y-me.Y)
		d2 := dx*dx + dy*dy
		if g.mark[s>>6]&(1<<(s&63)) != 0 {
			d2 = d2 * keptNum / keptDen
		}
		c = append(c, newCandidate(d2, s))
	}
	for _, s := range v.kept {
		g.mark[s>>6] = 0
	}
	if k := max(g.viewCap-len(out), 0); k < len(c) {
		nearest(c, k)
		c = c[:k]
	}
	for _, x := range c {
		out = append(out, x.slot())
	}
	g.cands, g.pinned = c, out
	// Kept sorted by slot, so the snapshots until the next selection read the entity
	// table in order: marked in the bitset and read back, cheaper than a sort.
	for _, s := range out {
		g.mark[s>>6] |= 1 << (s & 63)
	}
	v.kept, v.keptIDs = v.kept[:0], v.keptIDs[:0]
	for w, m := range g.mark {
		if m == 0 {
			continue
		}
		for ; m != 0; m &= m - 1 {
			s := int32(w*64 + bits.TrailingZeros64(m))
			v.kept = append(v.kept, s)
			v.keptIDs = append(v.keptIDs, st.Entities[s].ID)
		}
		g.mark[w] = 0
	}
	v.report(len(out), inView)
	return out
}

// pinnedOf appends to dst what self's view shows however crowded, once: the NPCs
// chasing it and the players it has an open or accepted trade with.
func (g *Game) pinnedOf(self int32, dst []int32) []int32 {
	dst = g.chasersOf(self, dst)
	if len(g.items.trades) == 0 || int(self) >= len(g.owners) || g.owners[self] == "" {
		return dst
	}
	me := g.owners[self]
	for _, t := range g.items.trades {
		other := t.to
		if t.to == me {
			other = t.from
		} else if t.from != me {
			continue
		}
		if s, here := g.slots[other]; here && !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}

// chasersOf appends to dst the NPCs chasing self this tick that dst lacks.
func (g *Game) chasersOf(self int32, dst []int32) []int32 {
	if g.chaseTick != g.state.Tick() || !g.chaseValid {
		g.chases = g.chases[:0]
		for i := range g.state.Entities {
			if t := g.state.Chases(int32(i)); t >= 0 {
				g.chases = append(g.chases, [2]int32{t, int32(i)})
			}
		}
		g.chaseTick, g.chaseValid = g.state.Tick(), true
	}
	for _, p := range g.chases {
		if p[0] == self && !slices.Contains(dst, p[1]) {
			dst = append(dst, p[1])
		}
	}
	return dst
}

// report queues a "view_capped" event for the view's character when the count its cap
// leaves out changed since the last report and the last report is old enough.
func (v *view) report(shown, inView int) {
	if !v.reported && shown == inView {
		return // never capped: nothing to tell
	}
	if v.reported && (shown == v.shown && inView == v.inView || v.sinceReport < viewCappedEvery) {
		return
	}
	v.shown, v.inView, v.sinceReport, v.reported = shown, inView, 0, true
	frame, err := json.Marshal(wire.Event{V: wire.Version, Kind: wire.KindEvent, Name: "view_capped",
		Data: ViewCapped{Shown: shown, InView: inView}})
	if err != nil {
		return
	}
	v.g.later = append(v.g.later, gameapi.Note{Frame: frame, CharacterIDs: []string{v.id}})
}

// nearest moves the k nearest candidates (by distance, then slot) to c[:k], in no
// particular order: a quickselect, linear on average, so a crowd of a thousand costs a
// few thousand comparisons per client rather than a sort. (A histogram of the
// distances first, to quickselect only the bucket of the k-th, measured slower:
// BenchmarkNearest.)
func nearest(c []candidate, k int) {
	lo, hi := 0, len(c)-1
	for lo < hi && k > lo && k <= hi {
		// Median of three as the pivot keeps a view sorted by slot from going quadratic.
		mid := lo + (hi-lo)/2
		if c[mid] < c[lo] {
			c[mid], c[lo] = c[lo], c[mid]
		}
		if c[hi] < c[lo] {
			c[hi], c[lo] = c[lo], c[hi]
		}
		if c[hi] < c[mid] {
			c[hi], c[mid] = c[mid], c[hi]
		}
		pivot := c[mid]
		i, j := lo, hi
		for i <= j {
			for c[i] < pivot {
				i++
			}
			for pivot < c[j] {
				j--
			}
			if i <= j {
				c[i], c[j] = c[j], c[i]
				i++
				j--
			}
		}
		// c[lo:j+1] <= pivot <= c[i:hi+1]; what lies between equals the pivot.
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
}
