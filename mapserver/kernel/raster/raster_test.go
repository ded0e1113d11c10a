package raster_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/raster"
)

// TestLine: a line visits its pixels from the first end to the last, one axis a step.
func TestLine(t *testing.T) {
	for _, tt := range []struct {
		x0, y0, x1, y1 int
		want           [][2]int
	}{
		{2, 3, 2, 3, [][2]int{{2, 3}}},
		{0, 0, 3, 0, [][2]int{{0, 0}, {1, 0}, {2, 0}, {3, 0}}},
		{1, 2, 1, 0, [][2]int{{1, 2}, {1, 1}, {1, 0}}},
		{0, 0, 2, 2, [][2]int{{0, 0}, {1, 0}, {1, 1}, {2, 1}, {2, 2}}},
		{3, 1, 0, 0, [][2]int{{3, 1}, {2, 1}, {1, 1}, {0, 1}, {0, 0}}},
	} {
		t.Run(fmt.Sprintf("%d,%d-%d,%d", tt.x0, tt.y0, tt.x1, tt.y1), func(t *testing.T) {
			var got [][2]int
			raster.Line(tt.x0, tt.y0, tt.x1, tt.y1, func(x, y int) { got = append(got, [2]int{x, y}) })
			if !slices.Equal(got, tt.want) {
				t.Errorf("pixels %v, want %v", got, tt.want)
			}
		})
	}
}
