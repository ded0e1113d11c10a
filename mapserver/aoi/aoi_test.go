package aoi_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mapyard/mapyard/mapserver/aoi"
)

// W1 in quanta: a 2000-unit map, 200-unit cells, 1/16-unit quanta.
const (
	q      = 16
	mapW   = 2000 * q
	cell   = 200 * q
	margin = 10 * q
)

func newW1(t testing.TB) *aoi.Grid {
	t.Helper()
	g, err := aoi.New(mapW, mapW, cell, margin)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestQueryEqualsBruteForce moves entities at random (steps and jumps, some leaving
// the bounds) and checks every viewer's query against visibility computed from the
// owned cells of all entities directly.
func TestQueryEqualsBruteForce(t *testing.T) {
	g := newW1(t)
	r := rand.New(rand.NewPCG(1, 2))
	const n = 400
	pos := make([][2]int32, n)
	present := make([]bool, n)
	var buf []int32
	for round := range 200 {
		for i := range int32(n) {
			switch k := r.IntN(100); {
			case k < 3:
				g.Remove(i)
				present[i] = false
				continue
			case k < 10 || !present[i]:
				pos[i] = [2]int32{r.Int32N(mapW+400) - 200, r.Int32N(mapW+400) - 200}
			default:
				pos[i][0] += r.Int32N(161) - 80
				pos[i][1] += r.Int32N(161) - 80
			}
			g.Update(i, pos[i][0], pos[i][1])
			present[i] = true
		}
		for v := range int32(n) {
			buf = g.Query(v, buf[:0])
			slices.Sort(buf)
			var want []int32
			if present[v] {
				vc := g.Owned(v)
				for e := range int32(n) {
					ec := g.Owned(e)
					if ec >= 0 && abs(ec%10-vc%10) <= 1 && abs(ec/10-vc/10) <= 1 {
						want = append(want, e)
					}
				}
			}
			if !slices.Equal(buf, want) {
				t.Fatalf("round %d viewer %d: query %v, brute force %v", round, v, buf, want)
			}
		}
	}
}

// populated returns a W1 grid with n entities at random places.
func populated(t testing.TB, n int32) *aoi.Grid {
	g := newW1(t)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range n {
		g.Update(i, r.Int32N(mapW), r.Int32N(mapW))
	}
	return g
}

func abs(v int32) int32 {
	if v < 0 {
		return -v
	}
	return v
}

// TestOwnershipHysteresis checks the owned cell against the cell containing the
// position: they may differ only within Margin of the owned cell's edge.
func TestOwnershipHysteresis(t *testing.T) {
	g := newW1(t)
	r := rand.New(rand.NewPCG(3, 4))
	x, y := int32(mapW/2), int32(mapW/2)
	for range 100000 {
		x = min(max(x+r.Int32N(41)-20, 0), mapW-1)
		y = min(max(y+r.Int32N(41)-20, 0), mapW-1)
		c, _ := g.Update(0, x, y)
		col, row := c%10, c/10
		if x < col*cell-margin || x >= (col+1)*cell+margin || y < row*cell-margin || y >= (row+1)*cell+margin {
			t.Fatalf("(%d, %d) owns cell %d beyond the margin", x, y, c)
		}
	}
}

// TestBorderWalkDoesNotFlap walks along a cell border, weaving across it by less than
// the margin (seed 004's flapping case): the owned cell changes only where the walk
// really enters the next cell along the border, and a walk that crosses the border
// for real changes it exactly once.
func TestBorderWalkDoesNotFlap(t *testing.T) {
	g := newW1(t)
	border := int32(4 * cell)
	changes := 0
	for x := int32(10 * q); x < 1990*q; x += q / 3 {
		weave := (x%7 - 3) * (margin / 4) // within 3/4 of the margin of the border
		if _, changed := g.Update(0, x, border+weave); changed {
			changes++
		}
	}
	if changes != 10 { // the first placement, then one per column border passed
		t.Fatalf("walking along a border changed the owned cell %d times, want 10", changes)
	}
	g.Update(0, 1100*q, border-2*margin)
	crossed := 0
	for y := border - 2*margin; y < border+2*margin; y += q / 4 {
		if _, changed := g.Update(0, 1100*q, y); changed {
			crossed++
		}
	}
	if crossed != 1 {
		t.Fatalf("walking across the border changed the cell %d times, want 1", crossed)
	}
}

func TestQueryAllocatesNothing(t *testing.T) {
	g := populated(t, 1200)
	buf := make([]int32, 0, 1200)
	if a := testing.AllocsPerRun(100, func() { buf = g.Query(7, buf[:0]) }); a != 0 {
		t.Fatalf("Query allocates %v times", a)
	}
}

func TestNewRejectsBadGeometry(t *testing.T) {
	for _, a := range [][4]int32{{0, 1, 1, 0}, {10, 10, 0, 0}, {10, 10, 4, 2}, {10, 10, 4, -1}} {
		if _, err := aoi.New(a[0], a[1], a[2], a[3]); err == nil {
			t.Errorf("New%v accepted", a)
		}
	}
}
