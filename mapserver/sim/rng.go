package sim

import "math/bits"

// rng is a SplitMix64 generator: integer arithmetic only, so it yields the same
// sequence on every platform, which keeps a seeded simulation replayable.
type rng struct{ s uint64 }

func newRNG(seed uint64) rng { return rng{s: mix64(seed ^ 0x73696d0000000000)} }

func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return mix64(r.s)
}

// between returns a uniform integer in [lo, hi] (lo when hi < lo).
func (r *rng) between(lo, hi int) int {
	if hi <= lo {
		return lo
	}
	h, _ := bits.Mul64(r.next(), uint64(hi-lo+1))
	return lo + int(h)
}
