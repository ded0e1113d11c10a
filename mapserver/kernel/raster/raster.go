// Package raster draws on a grid of pixels for both trees: the default asset set's art
// and the soak report's charts. It imports nothing, so it builds anywhere, the browser
// included.
package raster

// Line calls plot for every pixel of the straight line from (x0, y0) to (x1, y1), both
// ends included, in order (Bresenham). Each step moves along one axis only, so the line
// has no diagonal gaps. plot decides what a pixel outside the picture does.
func Line(x0, y0, x1, y1 int, plot func(x, y int)) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		plot(x0, y0)
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int { return max(v, -v) }

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}
