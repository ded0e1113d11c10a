package game

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestNearest: the k nearest candidates, ties broken by slot, end up in c[:k], for
// every k, on inputs with many equal distances, with distances from tiny to beyond
// what a candidate holds, and already sorted ones.
func TestNearest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 600 {
		n := r.IntN(200)
		c := make([]candidate, n)
		for i := range c {
			d2 := int64(r.IntN(1 + round%40)) // many equal distances
			if round%2 == 1 {
				d2 = r.Int64N(1 << (round % 48)) // distances a histogram bucket mixes
			}
			c[i] = newCandidate(d2, int32(i))
		}
		if round%3 == 0 {
			slices.SortFunc(c, cmpCandidate)
		}
		k := 0
		if n > 0 {
			k = r.IntN(n + 1)
		}
		want := slices.Clone(c)
		slices.SortFunc(want, cmpCandidate)
		got := slices.Clone(c)
		nearest(got, k)
		head := slices.Clone(got[:k])
		slices.SortFunc(head, cmpCandidate)
		if !slices.Equal(head, want[:k]) {
			t.Fatalf("round %d: n %d k %d: got %v, want %v", round, n, k, head, want[:k])
		}
		rest := slices.Clone(got)
		slices.SortFunc(rest, cmpCandidate)
		if !slices.Equal(rest, want) {
			t.Fatalf("round %d: nearest lost or doubled candidates", round)
		}
	}
}

func cmpCandidate(a, b candidate) int {
	switch da, db := a>>candidateSlotBits, b>>candidateSlotBits; {
	case da != db:
		return cmp.Compare(da, db)
	}
	return cmp.Compare(a.slot(), b.slot())
}

// BenchmarkNearest selects the 127 nearest of a thousand candidates spread over a disc
// (a crowd in one spot).
func BenchmarkNearest(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	src := make([]candidate, 1000)
	for i := range src {
		dx, dy := r.Int64N(1281)-640, r.Int64N(1281)-640
		src[i] = newCandidate(dx*dx+dy*dy, int32(i))
	}
	c := make([]candidate, len(src))
	for range b.N {
		copy(c, src)
		nearest(c, 127)
	}
}
