package sim

import "github.com/mapyard/mapyard/mapserver/kernel/mapgen"

// colliderCell is the side of a collider grid cell in quanta (16 units).
const colliderCell = 16 * QuantaPerUnit

// collider is one static collider in quanta.
type collider struct {
	circle       bool
	x, y, hx, hy int64
}

// Colliders is the static geometry bodies move against: the world's bounds, its
// walkable ground (the navigation grid's terrain bits: no water where water blocks, no
// slope steeper than the map allows) and its static colliders in quanta, bucketed in a
// uniform grid so that a step tests only the colliders near the body. It is immutable
// after NewColliders and safe to share.
type Colliders struct {
	width, height int32 // bounds in quanta
	cols, rows    int
	start         []int32 // cell i holds items[start[i]:start[i+1]]
	items         []int32
	list          []collider

	// The ground grid: groundCell quanta a side, one bit per cell (nil: all ground).
	groundCell             int64
	groundCols, groundRows int
	ground                 []byte
}

// NewColliders converts w's bounds, ground and colliders to quanta. The browser builds
// the same value from the same world, so its predicted moves collide identically.
func NewColliders(w *mapgen.World) *Colliders {
	c := &Colliders{width: FromCentimetres(w.Width), height: FromCentimetres(w.Height)}
	if n := w.Nav; n.CellSize > 0 && len(n.Ground) >= (n.Cols*n.Rows+7)/8 {
		c.groundCell = int64(FromCentimetres(n.CellSize))
		c.groundCols, c.groundRows = n.Cols, n.Rows
		c.ground = n.Ground
	}
	c.cols = int(c.width)/colliderCell + 1
	c.rows = int(c.height)/colliderCell + 1
	counts := make([]int32, c.cols*c.rows+1)
	for _, wc := range w.Colliders {
		if wc.Shape != mapgen.ShapeCircle && wc.Shape != mapgen.ShapeBox {
			continue
		}
		col := collider{
			circle: wc.Shape == mapgen.ShapeCircle,
			x:      int64(FromCentimetres(wc.X)), y: int64(FromCentimetres(wc.Y)),
			hx: int64(FromCentimetres(wc.HalfX)), hy: int64(FromCentimetres(wc.HalfY)),
		}
		c.list = append(c.list, col)
		c.eachCell(col, func(i int) { counts[i+1]++ })
	}
	c.start = make([]int32, len(counts))
	for i := 1; i < len(counts); i++ {
		c.start[i] = c.start[i-1] + counts[i]
	}
	c.items = make([]int32, c.start[len(c.start)-1])
	fill := append([]int32(nil), c.start[:len(c.start)-1]...)
	for n, col := range c.list {
		c.eachCell(col, func(i int) { c.items[fill[i]] = int32(n); fill[i]++ })
	}
	return c
}

// Bounds returns the world's size in quanta.
func (c *Colliders) Bounds() (width, height int32) { return c.width, c.height }

// eachCell calls fn with every grid cell the collider, grown by a body radius, touches.
func (c *Colliders) eachCell(col collider, fn func(int)) {
	c0, r0 := c.cellOf(col.x-col.hx-BodyRadius, col.y-col.hy-BodyRadius)
	c1, r1 := c.cellOf(col.x+col.hx+BodyRadius, col.y+col.hy+BodyRadius)
	for r := r0; r <= r1; r++ {
		for q := c0; q <= c1; q++ {
			fn(r*c.cols + q)
		}
	}
}

// cellOf returns the grid cell holding (x, y), clamped to the grid.
func (c *Colliders) cellOf(x, y int64) (col, row int) {
	col, row = int(x/colliderCell), int(y/colliderCell)
	col = max(0, min(col, c.cols-1))
	row = max(0, min(row, c.rows-1))
	if x < 0 {
		col = 0
	}
	if y < 0 {
		row = 0
	}
	return col, row
}

// Blocked reports whether a body centred at p would overlap a collider, reach past
// the bounds or stand on ground it may not (water, too steep).
func (c *Colliders) Blocked(p Vec) bool {
	x, y := int64(p.X), int64(p.Y)
	if x < BodyRadius || y < BodyRadius || x > int64(c.width)-BodyRadius || y > int64(c.height)-BodyRadius {
		return true
	}
	if !c.groundAt(x, y) {
		return true
	}
	return c.touches(x, y, BodyRadius)
}

// touches reports whether a disc of radius r centred at (x, y) overlaps a collider.
func (c *Colliders) touches(x, y, r int64) bool {
	col, row := c.cellOf(x, y)
	i := row*c.cols + col
	for _, n := range c.items[c.start[i]:c.start[i+1]] {
		if overlaps(&c.list[n], x, y, r) {
			return true
		}
	}
	return false
}

// LineOfSight reports whether the straight line from a to b crosses no static
// collider, sampled every 3 quanta (colliders are far wider); ground does not block
// sight.
func (c *Colliders) LineOfSight(a, b Vec) bool {
	dx, dy := int64(b.X)-int64(a.X), int64(b.Y)-int64(a.Y)
	n := max(abs64(dx), abs64(dy))/3 + 1
	for i := int64(1); i < n; i++ {
		if c.touches(int64(a.X)+dx*i/n, int64(a.Y)+dy*i/n, 0) {
			return false
		}
	}
	return true
}

// overlaps reports whether a disc of radius r at (x, y) overlaps col (touching is not
// overlapping; radius 0 is a point strictly inside).
func overlaps(col *collider, x, y, r int64) bool {
	dx, dy := x-col.x, y-col.y
	if col.circle {
		cr := col.hx + r
		return dx*dx+dy*dy < cr*cr
	}
	// Distance from the point to the box, per axis.
	ex := max(abs64(dx)-col.hx, 0)
	ey := max(abs64(dy)-col.hy, 0)
	if r == 0 {
		return abs64(dx) < col.hx && abs64(dy) < col.hy
	}
	return ex*ex+ey*ey < r*r
}

// groundAt reports whether the ground under (x, y) (quanta, inside the bounds) can be
// stood on.
func (c *Colliders) groundAt(x, y int64) bool {
	if c.ground == nil {
		return true
	}
	col := min(int(x/c.groundCell), c.groundCols-1)
	row := min(int(y/c.groundCell), c.groundRows-1)
	i := row*c.groundCols + col
	return c.ground[i>>3]&(1<<(i&7)) != 0
}

// NearestOpen returns p when a body may stand there, else the centre of the nearest
// ground cell where it may (searched ring by ring around p's cell, the closest centre
// of the first ring that has one, ties to the first in row-major order), so that a
// spawn point, a portal's arrival point or a carried position on water or inside a
// collider moves to land. It returns p unchanged when no cell is open.
func (c *Colliders) NearestOpen(p Vec) Vec {
	if !c.Blocked(p) {
		return p
	}
	cell := c.groundCell
	cols, rows := c.groundCols, c.groundRows
	if cell == 0 {
		cell = colliderCell / 4
		cols, rows = int(int64(c.width)/cell)+1, int(int64(c.height)/cell)+1
	}
	x, y := int64(max(p.X, 0)), int64(max(p.Y, 0))
	pc, pr := min(int(x/cell), cols-1), min(int(y/cell), rows-1)
	for ring := 0; ring < max(cols, rows); ring++ {
		best, bestD := Vec{}, int64(-1)
		for r := pr - ring; r <= pr+ring; r++ {
			for q := pc - ring; q <= pc+ring; q++ {
				if r < 0 || q < 0 || r >= rows || q >= cols || (max(abs(r-pr), abs(q-pc)) != ring) {
					continue
				}
				v := Vec{int32(int64(q)*cell + cell/2), int32(int64(r)*cell + cell/2)}
				if c.Blocked(v) {
					continue
				}
				dx, dy := int64(v.X)-int64(p.X), int64(v.Y)-int64(p.Y)
				if d := dx*dx + dy*dy; bestD < 0 || d < bestD {
					best, bestD = v, d
				}
			}
		}
		if bestD >= 0 {
			return best
		}
	}
	return p
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// slide moves p by (dx, dy), one axis after the other; an axis whose move would block
// is not taken. A body that starts blocked (spawned inside a collider) may still move
// wherever the move does not make it blocked, so it can walk out.
func (c *Colliders) slide(p Vec, dx, dy int32) Vec {
	if dx != 0 {
		if n := (Vec{p.X + dx, p.Y}); !c.Blocked(n) {
			p = n
		}
	}
	if dy != 0 {
		if n := (Vec{p.X, p.Y + dy}); !c.Blocked(n) {
			p = n
		}
	}
	return p
}
