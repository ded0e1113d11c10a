package game

import (
	"hash/fnv"
	"math"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// ArrivalClearance is how far outside a portal's trigger radius (in centimetres) a
// character arriving through its matching portal is placed, so the arrival does not
// trigger the way back at once.
const ArrivalClearance = 150

// Arrival is where a character admitted to a map spawns, in world units (metres; the
// world itself is in centimetres).
type Arrival struct {
	X, Y float64
	// Via says which rule chose the point: "saved" (its own saved position on this map),
	// "beside" (its saved position was inside one of this map's portals, so it stands
	// just outside that portal instead), "portal" (the portal of this map leading back to
	// where it came from) or "spawn" (the map's first spawn point).
	Via string
}

// ArrivalPoint decides where a character redeemed into world (of map mapID) appears,
// from the state it carried (nil for a character never saved): a state saved on this
// very map keeps its position, unless that position is inside one of the map's
// portals; one that comes from another map arrives next to this
// map's portal that leads back there, on the side facing the map's centre; anything
// else starts at the first spawn point. Everything else the character owns travels in
// the state's attributes, untouched.
func ArrivalPoint(w *mapgen.World, mapID string, st *record.CharacterState) Arrival {
	return ArrivalPointOf(w, mapID, "", st)
}

// ArrivalPointOf is ArrivalPoint for a named character: one that starts at a spawn
// point gets the spawn point its id hashes to, so that new players spread over all of
// them instead of piling up on the first.
func ArrivalPointOf(w *mapgen.World, mapID, characterID string, st *record.CharacterState) Arrival {
	width, height := float64(w.Width)/100, float64(w.Height)/100
	if st != nil && st.MapID == mapID && inside(st.X, st.Y, width, height) {
		// A state saved standing in a portal is the state a portal's transfer carried
		// when that transfer was never used (the player's connection dropped as it
		// stepped in, and its next join brought it back here). Put there, it would
		// have to leave the portal's area before the portal could take it again
		// (sim.AddPlayer), so it stands beside the portal instead.
		for _, p := range w.Portals {
			if math.Hypot(st.X*100-float64(p.X), st.Y*100-float64(p.Y)) <= float64(p.Radius) {
				x, y := besidePortal(w, p)
				return Arrival{X: x, Y: y, Via: "beside"}
			}
		}
		return Arrival{X: st.X, Y: st.Y, Via: "saved"}
	}
	if st != nil && st.MapID != "" {
		for _, p := range w.Portals {
			if p.TargetMapID == st.MapID {
				x, y := besidePortal(w, p)
				return Arrival{X: x, Y: y, Via: "portal"}
			}
		}
	}
	if len(w.Spawns) > 0 {
		h := fnv.New32a()
		h.Write([]byte(characterID))
		s := w.Spawns[int(h.Sum32()%uint32(len(w.Spawns)))]
		if characterID == "" {
			s = w.Spawns[0]
		}
		return Arrival{X: float64(s.X) / 100, Y: float64(s.Y) / 100, Via: "spawn"}
	}
	return Arrival{X: width / 2, Y: height / 2, Via: "spawn"}
}

// besidePortal is the point, in metres, ArrivalClearance outside portal p's trigger
// area on the side facing the map's centre.
func besidePortal(w *mapgen.World, p mapgen.Portal) (x, y float64) {
	cx, cy := float64(w.Width)/2, float64(w.Height)/2
	dx, dy := cx-float64(p.X), cy-float64(p.Y)
	d := math.Hypot(dx, dy)
	if d == 0 {
		dx, dy, d = 1, 0, 1
	}
	r := float64(p.Radius + ArrivalClearance)
	x, y = (float64(p.X)+dx/d*r)/100, (float64(p.Y)+dy/d*r)/100
	return clamp(x, float64(w.Width)/100), clamp(y, float64(w.Height)/100)
}

func inside(x, y, w, h float64) bool { return x >= 0 && y >= 0 && x <= w && y <= h }

func clamp(v, hi float64) float64 { return min(max(v, 0), hi) }
