package game

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestNearest: the k nearest candidates, ties broken by slot, end up in c[:k], for
// every k, on inputs with many equal distances and already sorted ones.
func TestNearest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		n := r.IntN(200)
		c := make([]candidate, n)
		for i := range c {
			c[i] = candidate{d2: int64(r.IntN(1 + round%40)), slot: int32(i)}
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
	switch {
	case a.less(b):
		return -1
	case b.less(a):
		return 1
	}
	return 0
}
