// Package aoi is the map's area of interest: a uniform grid of square cells in which
// every entity owns one cell, and a viewer sees the entities owning the 3 x 3 cells
// around the cell it owns.
//
// Ownership has hysteresis: an entity keeps its cell until it moves more than Margin
// past the cell's edge, so walking along a border does not flip the owned cell (and
// the spawn/despawn stream of every viewer near it) on every step. Entities are the
// simulation's slots (non-negative int32); positions are the simulation's quanta.
//
// Query appends to a caller-provided buffer and allocates nothing. A Grid is not safe
// for concurrent use; the tick loop owns it, and concurrent Query calls are safe only
// while no Update or Remove runs.
package aoi

import "fmt"

// noCell marks an entity not in the grid.
const noCell = -1

// Grid is the area-of-interest grid of one map.
type Grid struct {
	cellSize, margin int32
	cols, rows       int32
	cells            [][]int32 // entities owning each cell
	owned            []int32   // per entity: owned cell or noCell
	index            []int32   // per entity: its position in cells[owned]
}

// New returns a grid covering width x height with square cells of side cellSize and
// the given hysteresis margin (all in the same unit, quanta for the map server;
// W1: 200-unit cells). Positions outside the bounds count as the nearest edge cell.
func New(width, height, cellSize, margin int32) (*Grid, error) {
	if width <= 0 || height <= 0 || cellSize <= 0 || margin < 0 || margin >= cellSize/2 {
		return nil, fmt.Errorf("aoi: bounds %dx%d, cell %d, margin %d: need positive bounds and cell, 0 <= margin < cell/2", width, height, cellSize, margin)
	}
	g := &Grid{cellSize: cellSize, margin: margin, cols: (width + cellSize - 1) / cellSize, rows: (height + cellSize - 1) / cellSize}
	g.cells = make([][]int32, g.cols*g.rows)
	return g, nil
}

// CellSize returns the side of a cell.
func (g *Grid) CellSize() int32 { return g.cellSize }

// cellCoord returns the column (or row) of v, clamped to [0, n).
func (g *Grid) cellCoord(v, n int32) int32 {
	if v < 0 {
		return 0
	}
	return min(v/g.cellSize, n-1)
}

// Update places entity at (x, y). A new entity takes the cell containing the point;
// a known one changes cell only once the point lies more than Margin outside its
// owned cell. It returns the owned cell (row*cols + col) and whether it changed.
func (g *Grid) Update(entity int32, x, y int32) (cell int32, changed bool) {
	if entity < 0 {
		return noCell, false
	}
	for int(entity) >= len(g.owned) {
		g.owned = append(g.owned, noCell)
		g.index = append(g.index, 0)
	}
	cur := g.owned[entity]
	if cur != noCell {
		col, row := cur%g.cols, cur/g.cols
		x0, y0 := col*g.cellSize, row*g.cellSize
		// Edge cells extend without limit outward, matching the clamping of cellCoord.
		inX := (col == 0 || x >= x0-g.margin) && (col == g.cols-1 || x < x0+g.cellSize+g.margin)
		inY := (row == 0 || y >= y0-g.margin) && (row == g.rows-1 || y < y0+g.cellSize+g.margin)
		if inX && inY {
			return cur, false
		}
		g.unlink(entity, cur)
	}
	cell = g.cellCoord(y, g.rows)*g.cols + g.cellCoord(x, g.cols)
	g.owned[entity] = cell
	g.index[entity] = int32(len(g.cells[cell]))
	g.cells[cell] = append(g.cells[cell], entity)
	return cell, true
}

// unlink removes entity from cell's list by swapping the last entry into its place.
func (g *Grid) unlink(entity, cell int32) {
	list := g.cells[cell]
	i := g.index[entity]
	last := list[len(list)-1]
	list[i] = last
	g.index[last] = i
	g.cells[cell] = list[:len(list)-1]
}

// Remove takes entity out of the grid; unknown entities are ignored.
func (g *Grid) Remove(entity int32) {
	if entity < 0 || int(entity) >= len(g.owned) || g.owned[entity] == noCell {
		return
	}
	g.unlink(entity, g.owned[entity])
	g.owned[entity] = noCell
}

// Owned returns the cell entity owns, or -1 when it is not in the grid.
func (g *Grid) Owned(entity int32) int32 {
	if entity < 0 || int(entity) >= len(g.owned) {
		return noCell
	}
	return g.owned[entity]
}

// Query appends to buf the entities owning the 3 x 3 cells around the cell viewer
// owns, the viewer included, in no particular order. It returns buf unchanged for a
// viewer not in the grid. It allocates only if buf lacks capacity.
func (g *Grid) Query(viewer int32, buf []int32) []int32 {
	cell := g.Owned(viewer)
	if cell == noCell {
		return buf
	}
	col, row := cell%g.cols, cell/g.cols
	for r := max(row-1, 0); r <= min(row+1, g.rows-1); r++ {
		for c := max(col-1, 0); c <= min(col+1, g.cols-1); c++ {
			buf = append(buf, g.cells[r*g.cols+c]...)
		}
	}
	return buf
}
