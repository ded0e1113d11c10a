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

// ScaledSpeed returns speed (quanta per second) scaled by permille thousandths,
// rounded down, never below one quantum per second: how encumbrance
// (items.Encumbrance) slows a player. Integer math, so the map and a client compute the
// same speed.
func ScaledSpeed(speed, permille int32) int32 {
	if permille >= 1000 {
		return speed
	}
	return max(int32(int64(speed)*int64(max(permille, 0))/1000), 1)
}

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

// Stride is the movement state one input leaves behind and the next one starts from:
// the direction walked and how many applied inputs in a row walked it. A step's length
// depends on it and on nothing the client picks: the first step in a new direction is
// rounded down, and each further one adds what the run has earned, so no run ever gets
// ahead of the exact speed, however the client times or numbers its inputs.
type Stride struct {
	DX, DY int8
	// Run counts the inputs applied in a row with direction (DX, DY), the last one
	// included; 0 before the first input.
	Run uint32
}

// Next returns the stride after applying an input with direction (dx, dy).
func (st Stride) Next(dx, dy int8) Stride {
	if st.Run == 0 || dx != st.DX || dy != st.DY {
		return Stride{DX: dx, DY: dy, Run: 1}
	}
	st.Run++
	return st
}

// Displacement returns how far a body with per-axis velocity v (1/256 quanta per
// second, from Velocity) moves on step number phase (from 0) of a straight run at hz
// steps per second: the magnitude of the first phase+1 steps together is
// floor((phase+1)·|v|/(256·hz)), so a run of n steps never covers more than the exact
// n·|v|/(256·hz) and is mirror-symmetric for -v.
func Displacement(v int64, phase uint64, hz int) int32 {
	d := int64(hz) * 256
	a := v
	if a < 0 {
		a = -a
	}
	p := int64(phase % uint64(d))
	step := int32((a*(p+1))/d - (a*p)/d)
	if v < 0 {
		return -step
	}
	return step
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

// Walk returns where a body at p ends after one input in, and the stride it leaves,
// walking at speed quanta per second and hz steps per second from stride st against
// the static geometry c. Each axis moves on its own and stops where it would overlap a
// collider, leave the bounds or step off walkable ground, so a body slides along walls
// and shores. The client calls it to predict and the server to simulate: identical
// arguments give identical results on every platform. in.Seq plays no part.
func Walk(c *Colliders, p Vec, st Stride, in Input, speed int32, hz int) (Vec, Stride) {
	st = st.Next(in.DX, in.DY)
	vx, vy := Velocity(in.DX, in.DY, speed)
	phase := uint64(st.Run - 1)
	return c.slide(p, Displacement(vx, phase, hz), Displacement(vy, phase, hz)), st
}

// Replay returns where a player at p with stride st ends after running inputs in
// order, and its stride then: how a client reconciles, starting from the position a
// snapshot shows for the last input the server applied (and the stride its own inputs
// up to that one give) and replaying the inputs it sent after it.
func Replay(c *Colliders, p Vec, st Stride, inputs []Input, speed int32, hz int) (Vec, Stride) {
	for _, in := range inputs {
		p, st = Walk(c, p, st, in, speed, hz)
	}
	return p, st
}

// StrideAfter returns the stride a client's inputs leave once the server has applied
// them all in order: the direction of the last one and the length of the run of equal
// directions it ends. A client that numbers its inputs 1, 2, 3, … and whose inputs all
// reach the server computes with it the stride at the acknowledged input.
func StrideAfter(inputs []Input) Stride {
	var st Stride
	for _, in := range inputs {
		st = st.Next(in.DX, in.DY)
	}
	return st
}
