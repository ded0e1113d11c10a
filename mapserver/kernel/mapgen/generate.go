package mapgen

// Navigation cell flags used while generating.
const (
	navTerrainBlocked uint8 = 1 << iota // too steep, or water that blocks
	navCollider                         // under a static collider
	navReserved                         // kept clear around spawns and portals
)

// generator holds the state of one Generate call. It is never shared.
type generator struct {
	cfg    *MapConfig
	w      *World
	slopes []int32 // per terrain cell, permille
	nav    []uint8 // per navigation cell, nav* flags
	idTag  uint64  // seed-derived high bits of every static object id
	nextN  uint32  // generator order of the next static object
}

// Generate validates cfg and builds its static world. The result depends only on the
// config (never on the platform, the time or earlier calls); a config that passes
// Validate always generates. Errors are *ValidationError.
func Generate(cfg MapConfig) (*World, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &generator{
		cfg: &cfg,
		w: &World{
			SchemaVersion: cfg.SchemaVersion,
			MapID:         cfg.MapID,
			Seed:          cfg.Seed,
			Width:         int32(cfg.Bounds.Width * 100),
			Height:        int32(cfg.Bounds.Height * 100),
			AssetSets:     append([]AssetSetRef(nil), cfg.AssetSets...),
		},
		idTag: mix64(cfg.Seed^streamIDs) & (1<<21 - 1),
	}
	g.generateTerrain()
	g.generateBiomes()
	g.generateNavBase()
	g.generateWalls()
	g.generateSpawns()
	g.generatePortals()
	g.generateProps()
	g.finishNav()
	return g.w, nil
}

// nextID returns the next static object id: 21 bits derived from the map seed above 32
// bits of generator order, so ids are unique within a world, almost always differ
// between maps, and stay below 2^53 so JavaScript numbers hold them exactly.
func (g *generator) nextID() uint64 {
	g.nextN++
	return g.idTag<<32 | uint64(g.nextN)
}

// generateNavBase sizes the navigation grid and blocks cells on steep terrain and, when
// configured, water.
func (g *generator) generateNavBase() {
	s := &g.cfg.StaticCollider
	cell := int64(s.NavCellSize) * 100
	cols := cellsAlong(g.cfg.Bounds.Width, s.NavCellSize)
	rows := cellsAlong(g.cfg.Bounds.Height, s.NavCellSize)
	g.w.Nav = NavGrid{CellSize: int32(cell), Cols: cols, Rows: rows}
	g.nav = make([]uint8, cols*rows)
	maxSlope := int32(s.MaxWalkableSlope)
	i := 0
	for r := 0; r < rows; r++ {
		y := int64(r)*cell + cell/2
		for c := 0; c < cols; c++ {
			t := g.terrainCell(int64(c)*cell+cell/2, y)
			if g.slopes[t] > maxSlope || s.BlockWater && g.w.Biomes[t] == BiomeWater {
				g.nav[i] = navTerrainBlocked
			}
			i++
		}
	}
}

// finishNav packs the walkable and the ground bits.
func (g *generator) finishNav() {
	bits := make([]byte, (len(g.nav)+7)/8)
	ground := make([]byte, len(bits))
	for i, f := range g.nav {
		if f&(navTerrainBlocked|navCollider) == 0 {
			bits[i>>3] |= 1 << (i & 7)
		}
		if f&navTerrainBlocked == 0 {
			ground[i>>3] |= 1 << (i & 7)
		}
	}
	g.w.Nav.Walkable = bits
	g.w.Nav.Ground = ground
}

// cellRange returns the navigation cells [c0, c1] x [r0, r1] touched by the rectangle
// with centre (x, y) and half extents (hx, hy), clamped to the grid; ok is false when
// the rectangle misses the grid.
func (g *generator) cellRange(x, y, hx, hy int64) (c0, c1, r0, r1 int, ok bool) {
	n := &g.w.Nav
	cell := int64(n.CellSize)
	lo := func(v int64) int { return int(max(v, 0) / cell) }
	hi := func(v int64, cells int) int { return int(min(v/cell, int64(cells-1))) }
	if x+hx < 0 || y+hy < 0 {
		return 0, 0, 0, 0, false
	}
	c0, c1 = lo(x-hx), hi(x+hx, n.Cols)
	r0, r1 = lo(y-hy), hi(y+hy, n.Rows)
	return c0, c1, r0, r1, c0 <= c1 && r0 <= r1
}

// overlaps reports whether the shape (circle of radius hx, or box with half extents hx,
// hy) centred at (x, y) overlaps navigation cell (c, r) with a positive area.
func (g *generator) overlaps(shape PropShape, x, y, hx, hy int64, c, r int) bool {
	cell := int64(g.w.Nav.CellSize)
	x0, y0 := int64(c)*cell, int64(r)*cell
	if shape != ShapeCircle {
		return x-hx < x0+cell && x+hx > x0 && y-hy < y0+cell && y+hy > y0
	}
	dx := min(max(x, x0), x0+cell) - x
	dy := min(max(y, y0), y0+cell) - y
	return dx*dx+dy*dy < hx*hx
}

// anyFlag reports whether a cell under the shape has any of the flags.
func (g *generator) anyFlag(shape PropShape, x, y, hx, hy int64, flags uint8) bool {
	c0, c1, r0, r1, ok := g.cellRange(x, y, hx, hy)
	if !ok {
		return false
	}
	cols := g.w.Nav.Cols
	for r := r0; r <= r1; r++ {
		for c := c0; c <= c1; c++ {
			if g.nav[r*cols+c]&flags != 0 && g.overlaps(shape, x, y, hx, hy, c, r) {
				return true
			}
		}
	}
	return false
}

// mark sets flag on every cell under the shape.
func (g *generator) mark(shape PropShape, x, y, hx, hy int64, flag uint8) {
	c0, c1, r0, r1, ok := g.cellRange(x, y, hx, hy)
	if !ok {
		return
	}
	cols := g.w.Nav.Cols
	for r := r0; r <= r1; r++ {
		for c := c0; c <= c1; c++ {
			if g.overlaps(shape, x, y, hx, hy, c, r) {
				g.nav[r*cols+c] |= flag
			}
		}
	}
}

// navFlags returns the flags of the navigation cell holding (x, y).
func (g *generator) navFlags(x, y int64) uint8 {
	n := &g.w.Nav
	_, c := splitCoord(x, int64(n.CellSize), n.Cols)
	_, r := splitCoord(y, int64(n.CellSize), n.Rows)
	return g.nav[r*n.Cols+c]
}

// generateWalls adds the boundary wall colliders along the inside of the bounds.
func (g *generator) generateWalls() {
	s := &g.cfg.StaticCollider
	if !s.BoundaryWalls {
		return
	}
	w, h := int64(g.w.Width), int64(g.w.Height)
	t := int64(s.WallThickness) * 100
	walls := [4][4]int64{ // x, y, hx, hy
		{w / 2, t / 2, w / 2, t / 2},   // south
		{w / 2, h - t/2, w / 2, t / 2}, // north
		{t / 2, h / 2, t / 2, h / 2},   // west
		{w - t/2, h / 2, t / 2, h / 2}, // east
	}
	for _, b := range walls {
		g.w.Colliders = append(g.w.Colliders, Collider{
			ID: g.nextID(), Shape: ShapeBox,
			X: int32(b[0]), Y: int32(b[1]), HalfX: int32(b[2]), HalfY: int32(b[3]),
		})
		g.mark(ShapeBox, b[0], b[1], b[2], b[3], navCollider)
	}
}
