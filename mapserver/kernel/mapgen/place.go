package mapgen

// Placement constants, in centimetres.
const (
	placementTries   = 64
	spawnSpacing     = 10_00 // between spawn points
	spawnClearRadius = 8_00  // kept free of props around a spawn point
	portalRadius     = 3_00  // trigger radius of a portal
	portalClear      = 12_00 // kept free of props around a portal
)

// site is a candidate position for a spawn point or portal.
type site struct {
	x, y     int64
	walkable bool
	dist2    int64 // squared distance to the nearest object it must keep away from
}

// better reports whether s is a better fallback than o: walkable first, then farther.
func (s site) better(o site) bool {
	if s.walkable != o.walkable {
		return s.walkable
	}
	return s.dist2 > o.dist2
}

// pickSite draws up to placementTries positions in [x0, x1) x [y0, y1) and returns the
// first walkable one at least minDist from every point in avoid, or the best one seen.
// It always draws exactly two numbers per try and always returns, so a map with no good
// ground still gets its spawn points and portals.
func (g *generator) pickSite(r *rng, x0, x1, y0, y1, minDist int64, avoid [][2]int64) site {
	var best site
	for try := 0; try < placementTries; try++ {
		s := site{x: x0 + int64(r.intn(int(x1-x0))), y: y0 + int64(r.intn(int(y1-y0)))}
		s.walkable = g.navFlags(s.x, s.y)&(navTerrainBlocked|navCollider) == 0
		s.dist2 = 1 << 62
		for _, p := range avoid {
			dx, dy := s.x-p[0], s.y-p[1]
			s.dist2 = min(s.dist2, dx*dx+dy*dy)
		}
		if s.walkable && s.dist2 >= minDist*minDist {
			return s
		}
		if try == 0 || s.better(best) {
			best = s
		}
	}
	return best
}

// generateSpawns places the spawn points in the middle half of the map, spaced apart.
func (g *generator) generateSpawns() {
	r := newRNG(g.cfg.Seed, streamSpawns)
	w, h := int64(g.w.Width), int64(g.w.Height)
	var placed [][2]int64
	for i := 0; i < g.cfg.GenerationRules.SpawnPoints; i++ {
		s := g.pickSite(&r, w/4, w-w/4, h/4, h-h/4, spawnSpacing, placed)
		placed = append(placed, [2]int64{s.x, s.y})
		g.w.Spawns = append(g.w.Spawns, SpawnPoint{
			ID: g.nextID(), X: int32(s.x), Y: int32(s.y), Z: g.w.Terrain.At(int32(s.x), int32(s.y)),
		})
		g.mark(ShapeCircle, s.x, s.y, spawnClearRadius, spawnClearRadius, navReserved)
	}
}

// generatePortals places the portals of every rule, in rule order, away from the edges,
// far from the spawn points and apart from each other.
func (g *generator) generatePortals() {
	r := newRNG(g.cfg.Seed, streamPortals)
	w, h := int64(g.w.Width), int64(g.w.Height)
	side := min(w, h)
	margin := side / 10
	var spawns, portals [][2]int64
	for _, s := range g.w.Spawns {
		spawns = append(spawns, [2]int64{int64(s.X), int64(s.Y)})
	}
	for _, rule := range g.cfg.GenerationRules.Portals {
		for k := 0; k < rule.Count; k++ {
			targetSeed := r.next() & MaxSeed // drawn for every portal to keep the stream stable
			if targetSeed == 0 {
				targetSeed = 1
			}
			avoid := append(append([][2]int64(nil), spawns...), portals...)
			s := g.pickSite(&r, margin, w-margin, margin, h-margin, side/4, avoid)
			portals = append(portals, [2]int64{s.x, s.y})
			p := Portal{
				ID: g.nextID(), X: int32(s.x), Y: int32(s.y), Z: g.w.Terrain.At(int32(s.x), int32(s.y)),
				Radius: portalRadius, TargetMapID: rule.TargetMapID,
			}
			if rule.Discover {
				p.TargetMapID = DerivedMapID(g.cfg.MapID, targetSeed)
				p.TargetSeed = targetSeed
			}
			g.w.Portals = append(g.w.Portals, p)
			g.mark(ShapeCircle, s.x, s.y, portalClear, portalClear, navReserved)
		}
	}
}

// propChoice is one prop kind allowed in a biome with its cumulative weight.
type propChoice struct {
	kind int // index into World.PropKinds and defs
	cum  int
}

// generateProps makes PropDensity placement attempts per km². Each attempt draws a
// position and a kind allowed in the biome there (weighted), and keeps the prop if the
// ground is not too steep, it stays clear of spawns and portals, and its collider, if
// any, lies inside the bounds and overlaps no other collider's cells. Every attempt
// draws the same five numbers whatever happens, so one rejected prop never shifts the
// others.
func (g *generator) generateProps() {
	var defs []*propKindDef
	for _, id := range g.cfg.PropSetIDs {
		set := &propCatalog[findPropSet(id)]
		for k := range set.kinds {
			defs = append(defs, &set.kinds[k])
			g.w.PropKinds = append(g.w.PropKinds, PropKind{Name: set.kinds[k].name, Set: set.id, Shape: set.kinds[k].shape})
		}
	}
	var choices [numBiomes][]propChoice
	for b := Biome(0); b < numBiomes; b++ {
		cum := 0
		for k, d := range defs {
			if d.biomes.has(b) {
				cum += d.weight
				choices[b] = append(choices[b], propChoice{kind: k, cum: cum})
			}
		}
	}

	r := newRNG(g.cfg.Seed, streamProps)
	w, h := int64(g.w.Width), int64(g.w.Height)
	attempts := g.cfg.perMap(g.cfg.GenerationRules.PropDensity)
	for a := 0; a < attempts; a++ {
		x, y := int64(r.intn(int(w))), int64(r.intn(int(h)))
		pick, yaw, scaleDraw := r.next(), r.next(), r.next()

		t := g.terrainCell(x, y)
		list := choices[g.w.Biomes[t]]
		if len(list) == 0 {
			continue
		}
		roll := int(pick % uint64(list[len(list)-1].cum))
		choice := list[0]
		for _, c := range list {
			if roll < c.cum {
				choice = c
				break
			}
		}
		d := defs[choice.kind]
		if g.slopes[t] > int32(d.maxSlope) || g.navFlags(x, y)&(navReserved|navCollider) != 0 {
			continue
		}
		scale := int64(d.minScale) + int64(scaleDraw%uint64(d.maxScale-d.minScale+1))
		p := Prop{Kind: uint16(choice.kind), X: int32(x), Y: int32(y), Yaw: uint16(yaw), Scale: uint16(scale)}

		var col Collider
		if d.shape != ShapeNone {
			hx := int64(d.size) * scale / 1000
			hy := hx
			if d.shape == ShapeBox {
				// Boxes turn by quarter turns only, so their colliders stay axis-aligned.
				p.Yaw = uint16(yaw>>62) << 14
				hy = hx * int64(d.depth) / 1000
				if p.Yaw&(1<<14) != 0 {
					hx, hy = hy, hx
				}
			}
			if x-hx < 0 || y-hy < 0 || x+hx > w || y+hy > h ||
				g.anyFlag(d.shape, x, y, hx, hy, navReserved|navCollider) {
				continue
			}
			g.mark(d.shape, x, y, hx, hy, navCollider)
			col = Collider{Shape: d.shape, X: int32(x), Y: int32(y), HalfX: int32(hx), HalfY: int32(hy)}
		}
		p.ID = g.nextID()
		p.Z = g.w.Terrain.At(p.X, p.Y)
		g.w.Props = append(g.w.Props, p)
		if col.Shape != ShapeNone {
			col.ID, col.Owner = g.nextID(), p.ID
			g.w.Colliders = append(g.w.Colliders, col)
		}
	}
}
