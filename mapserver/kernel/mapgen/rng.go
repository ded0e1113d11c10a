package mapgen

import "math/bits"

// Stream tags separate the random sequences of the generator's stages, so that a
// change to how many numbers one stage draws never shifts what another stage draws.
const (
	streamTerrain  uint64 = 0x7465727261696e00 // "terrain"
	streamMoisture uint64 = 0x6d6f697374757200 // "moistur"
	streamSpawns   uint64 = 0x737061776e730000 // "spawns"
	streamPortals  uint64 = 0x706f7274616c7300 // "portals"
	streamProps    uint64 = 0x70726f7073000000 // "props"
	streamIDs      uint64 = 0x6964730000000000 // "ids"
	streamDerive   uint64 = 0x6465726976650000 // "derive"
)

// mix64 is the SplitMix64 finalizer: a cheap bijective scrambler of 64-bit values.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

// hash2 hashes a lattice point (x, y) of the stream salt under seed. It is the source
// of every noise value, so it must depend on nothing but its arguments.
func hash2(seed, salt uint64, x, y int64) uint64 {
	return mix64(seed ^ mix64(salt^uint64(uint32(x))^uint64(uint32(y))<<32))
}

// rng is a SplitMix64 generator: small, fast, and defined by integer arithmetic alone,
// so it yields the same sequence on every platform. It is never shared.
type rng struct{ s uint64 }

// newRNG starts the sequence of one stream under seed.
func newRNG(seed, stream uint64) rng { return rng{s: mix64(seed ^ mix64(stream))} }

// next returns the next 64 random bits.
func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return mix64(r.s)
}

// intn returns a uniform integer in [0, n) for n > 0 (Lemire's method with rejection).
func (r *rng) intn(n int) int {
	if n <= 1 {
		return 0
	}
	bound := uint64(n)
	hi, lo := bits.Mul64(r.next(), bound)
	if lo < bound {
		threshold := -bound % bound
		for lo < threshold {
			hi, lo = bits.Mul64(r.next(), bound)
		}
	}
	return int(hi)
}

// between returns a uniform integer in [lo, hi]; lo when hi < lo.
func (r *rng) between(lo, hi int) int {
	if hi <= lo {
		return lo
	}
	return lo + r.intn(hi-lo+1)
}
