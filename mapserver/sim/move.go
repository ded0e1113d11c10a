package sim

// Units. The simulation works in integer quanta of 1/16 unit, where one unit is one
// metre (a MapConfig's bounds are in metres) and the generated world is in centimetres.
// The wire carries the same quanta, so a client that predicts with this code computes
// exactly the positions the server sends.
const (
	// QuantaPerUnit is the number of position quanta in one unit (metre).
	QuantaPerUnit = 16
	// CentimetresPerUnit converts world centimetres to units.
	CentimetresPerUnit = 100
	// DefaultPlayerSpeed is a player's speed in quanta per second (5 units/s, W1).
	DefaultPlayerSpeed = 5 * QuantaPerUnit
	// DefaultNPCSpeed is an NPC's speed in quanta per second (3 units/s, W1).
	DefaultNPCSpeed = 3 * QuantaPerUnit
	// BodyRadius is the collision radius of players and NPCs in quanta (0.375 unit).
	BodyRadius = 6
	// MaxDir bounds each component of a direction: DX and DY lie in [-MaxDir, MaxDir].
	MaxDir = 127
)

// Vec is a position in quanta (1/16 unit).
type Vec struct{ X, Y int32 }

// FromCentimetres converts a world position in centimetres to quanta, rounding to the
// nearest quantum; the same integer math on every platform.
func FromCentimetres(cm int32) int32 {
	v := int64(cm) * QuantaPerUnit
	if v >= 0 {
		return int32((v + CentimetresPerUnit/2) / CentimetresPerUnit)
	}
	return int32(-((-v + CentimetresPerUnit/2) / CentimetresPerUnit))
}

// ToCentimetres converts quanta to world centimetres (exact: a quantum is 6.25 cm,
// rounded toward zero).
func ToCentimetres(q int32) int32 { return int32(int64(q) * CentimetresPerUnit / QuantaPerUnit) }

// Input is one movement input of a player: the direction to walk for one tick. Seq
// orders a player's inputs; DX and DY give the direction (any length: the speed is
// fixed), (0, 0) standing still.
type Input struct {
	Seq    uint64
	DX, DY int8
}

// Velocity returns the per-axis velocity of direction (dx, dy) at speed quanta per
// second, in 1/256 quanta per second, truncated toward zero so that opposite
// directions are mirror images. It uses integer math only.
func Velocity(dx, dy int8, speed int32) (vx, vy int64) {
	sq := int64(dx)*int64(dx) + int64(dy)*int64(dy)
	if sq == 0 {
		return 0, 0
	}
	l := isqrt(sq << 16) // |d| * 256
	return int64(speed) * int64(dx) * 65536 / l, int64(speed) * int64(dy) * 65536 / l
}

// Displacement returns how far a body with per-axis velocity v (1/256 quanta per
// second, from Velocity) moves during step number phase of a simulation running at hz
// steps per second. Summed over any hz*256 consecutive phases it is exactly v/256 per
// second; the phase (an input's seq for players, the tick for NPCs) spreads the
// fractional quanta over steps deterministically, so a predicting client that knows
// the seq reproduces the server's step exactly.
func Displacement(v int64, phase uint64, hz int) int32 {
	d := int64(hz) * 256
	p := int64(phase % uint64(d))
	return int32(floorDiv(v*(p+1), d) - floorDiv(v*p, d))
}

// floorDiv divides rounding toward negative infinity (d > 0).
func floorDiv(a, d int64) int64 {
	q := a / d
	if a%d != 0 && a < 0 {
		q--
	}
	return q
}

// isqrt returns floor(sqrt(n)) for n >= 0 using integer Newton iteration.
func isqrt(n int64) int64 {
	if n < 2 {
		return n
	}
	x := n
	y := (x + 1) / 2
	for y < x {
		x = y
		y = (x + n/x) / 2
	}
	return x
}

// Move returns where a body at p ends after one step of input in, at speed quanta
// per second and hz steps per second, against the static geometry c. Each axis moves
// on its own and stops where it would overlap a collider or leave the bounds, so a
// body slides along walls. The client calls it to predict and the server to simulate:
// identical arguments give identical results on every platform.
func Move(c *Colliders, p Vec, in Input, speed int32, hz int) Vec {
	vx, vy := Velocity(in.DX, in.DY, speed)
	return c.slide(p, Displacement(vx, in.Seq, hz), Displacement(vy, in.Seq, hz))
}

// Replay returns where a player at p ends after running inputs in order: how a client
// reconciles, starting from the position a snapshot shows for the last seq the server
// applied and replaying the inputs it sent after that seq.
func Replay(c *Colliders, p Vec, inputs []Input, speed int32, hz int) Vec {
	for _, in := range inputs {
		p = Move(c, p, in, speed, hz)
	}
	return p
}
