package aoi_test

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkQueryW1 measures one viewer's query on W1 at N = 1000: 1200 entities on a
// 2000 x 2000 map with 200-unit cells, about 95 in view.
func BenchmarkQueryW1(b *testing.B) {
	g := populated(b, 1200)
	buf := make([]int32, 0, 1200)
	seen := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		buf = g.Query(int32(i%1200), buf[:0])
		seen += len(buf)
	}
	b.ReportMetric(float64(seen)/float64(b.N), "inview")
}

// BenchmarkUpdateW1 measures moving one entity by a W1 step (most updates keep the cell).
func BenchmarkUpdateW1(b *testing.B) {
	g := newW1(b)
	r := rand.New(rand.NewPCG(7, 8))
	pos := make([][2]int32, 1200)
	for i := range pos {
		pos[i] = [2]int32{r.Int32N(mapW), r.Int32N(mapW)}
		g.Update(int32(i), pos[i][0], pos[i][1])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := i % 1200
		pos[k][0] = min(max(pos[k][0]+int32(i%11)-5, 0), mapW-1)
		g.Update(int32(k), pos[k][0], pos[k][1])
	}
}
