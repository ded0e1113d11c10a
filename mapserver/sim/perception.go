package sim

// NPC perception (seed 003). Every PerceptionEvery ticks each NPC looks for players: by
// distance, field-of-view angle around the way it faces and line of sight against the
// static colliders. A seen player raises its suspicion, the more the closer it stands;
// without one suspicion decays. Suspicion moves the NPC through idle → suspicious →
// alert → chasing and back down, each change reported as a PerceptionEvent. A chasing
// NPC walks toward its target under the movement rules every body obeys (colliders,
// ground) and gives up when it has not seen the target for a while.
//
// Players are bucketed in a grid of cells one sight range wide once per pass, so each
// NPC tests only the players of the 3 × 3 cells around it: the cost grows with NPCs plus
// players, not with their product. Everything is integer math and slice order, so the
// same seed and inputs give the same states.

// Perception tunables, the defaults of Options' perception fields.
const (
	// DefaultPerceptionEvery is the number of ticks between two perception passes
	// (6 at 30 Hz: five a second).
	DefaultPerceptionEvery = 6
	// DefaultSightRange is how far an NPC sees, in quanta (15 units).
	DefaultSightRange = 15 * QuantaPerUnit
	// DefaultLoseAfter is how many passes a chasing NPC goes on without seeing its
	// target before it gives up (two seconds at the default rate).
	DefaultLoseAfter = 10
)

// Suspicion thresholds (0 … maxSuspicion). Going up, a state is reached at its up
// threshold; going down it is left only below its down threshold, so a player at the
// edge of sight does not make an NPC flicker between two states.
const (
	maxSuspicion     = 100
	suspiciousUp     = 25
	suspiciousDown   = 10
	alertUp          = 60
	alertDown        = 40
	chaseUp          = 100
	suspicionDecay   = 6
	suspicionGainMin = 8
	suspicionGainMax = 40
)

// PerceptionEvent reports that an NPC's perception state changed this tick.
type PerceptionEvent struct {
	Slot     int32
	ID       EntityID
	From, To uint8 // NPCIdle … NPCChasing
	// Target is the player the NPC chases or last saw (0: none).
	Target EntityID
}

// perceiver is the perception part of an NPC's slot.
type perceiver struct {
	suspicion int32
	target    int32 // slot of the player chased or last seen, -1 for none
	targetID  EntityID
	unseen    int32 // passes since the target was last seen
}

// playerGrid buckets player slots by cell for one perception pass.
type playerGrid struct {
	cell       int64
	cols, rows int
	start      []int32 // cell i holds slots[start[i]:start[i+1]]
	slots      []int32
	fill       []int32
}

// build buckets every player of s into cells of the sight range.
func (g *playerGrid) build(s *State) {
	w, h := s.colliders.Bounds()
	g.cell = int64(s.opts.SightRange)
	g.cols, g.rows = int(int64(w)/g.cell)+1, int(int64(h)/g.cell)+1
	n := g.cols*g.rows + 1
	if cap(g.start) < n {
		g.start, g.fill = make([]int32, n), make([]int32, n)
	}
	g.start, g.fill = g.start[:n], g.fill[:n]
	clear(g.start)
	players := 0
	for i := range s.Entities {
		if e := &s.Entities[i]; e.Kind == KindPlayer {
			g.start[g.cellOf(e.Pos)+1]++
			players++
		}
	}
	for i := 1; i < n; i++ {
		g.start[i] += g.start[i-1]
	}
	if cap(g.slots) < players {
		g.slots = make([]int32, players)
	}
	g.slots = g.slots[:players]
	copy(g.fill, g.start)
	for i := range s.Entities {
		if e := &s.Entities[i]; e.Kind == KindPlayer {
			c := g.cellOf(e.Pos)
			g.slots[g.fill[c]] = int32(i)
			g.fill[c]++
		}
	}
}

func (g *playerGrid) cellOf(p Vec) int {
	c := min(max(int(int64(p.X)/g.cell), 0), g.cols-1)
	r := min(max(int(int64(p.Y)/g.cell), 0), g.rows-1)
	return r*g.cols + c
}

// perceive runs one perception pass over every NPC.
func (s *State) perceive() {
	s.seen.build(s)
	for i := range s.Entities {
		if s.Entities[i].Kind == KindNPC {
			s.perceiveNPC(int32(i))
		}
	}
}

// perceiveNPC updates one NPC's suspicion and state from the players it sees now.
func (s *State) perceiveNPC(slot int32) {
	e := &s.Entities[slot]
	pc := &s.perceivers[slot]
	best, bestD2 := int32(-1), int64(-1)
	r := int64(s.opts.SightRange)
	g := &s.seen
	c0, r0 := int(int64(e.Pos.X)/g.cell), int(int64(e.Pos.Y)/g.cell)
	for row := max(r0-1, 0); row <= min(r0+1, g.rows-1); row++ {
		for col := max(c0-1, 0); col <= min(c0+1, g.cols-1); col++ {
			cell := row*g.cols + col
			for _, ps := range g.slots[g.start[cell]:g.start[cell+1]] {
				p := s.Entities[ps].Pos
				dx, dy := int64(p.X-e.Pos.X), int64(p.Y-e.Pos.Y)
				d2 := dx*dx + dy*dy
				if d2 > r*r || (bestD2 >= 0 && d2 >= bestD2) {
					continue
				}
				if !inFieldOfView(e.DX, e.DY, dx, dy) && ps != pc.target {
					continue
				}
				if !s.colliders.LineOfSight(e.Pos, p) {
					continue
				}
				best, bestD2 = ps, d2
			}
		}
	}
	from := e.State
	if best >= 0 {
		d := isqrt(bestD2)
		pc.suspicion += int32(suspicionGainMin + (suspicionGainMax-suspicionGainMin)*(r-d)/r)
		pc.target, pc.targetID, pc.unseen = best, s.Entities[best].ID, 0
	} else {
		pc.suspicion -= suspicionDecay
		pc.unseen++
	}
	pc.suspicion = max(0, min(pc.suspicion, maxSuspicion))
	e.State = nextPerception(e.State, pc.suspicion)
	if e.State == NPCChasing && (pc.unseen > s.opts.LoseAfter || !s.isPlayer(pc.target, pc.targetID)) {
		// Lost: it gives up the chase and calms down from alert.
		e.State, pc.suspicion = NPCAlert, min(pc.suspicion, alertUp-1)
		pc.target, pc.targetID = -1, 0
	}
	if e.State != NPCChasing && from == NPCChasing {
		s.turn(slot)
	}
	if e.State != from {
		s.events.Perception = append(s.events.Perception, PerceptionEvent{Slot: slot, ID: e.ID, From: from, To: e.State, Target: pc.targetID})
	}
}

// isPlayer reports whether slot still holds the player with id.
func (s *State) isPlayer(slot int32, id EntityID) bool {
	return slot >= 0 && int(slot) < len(s.Entities) && s.Entities[slot].Kind == KindPlayer && s.Entities[slot].ID == id
}

// nextPerception returns the perception state that suspicion leads to from state: one
// step up or down per pass at most, so every state in between is passed (and reported).
func nextPerception(state uint8, suspicion int32) uint8 {
	var want uint8
	switch {
	case suspicion >= chaseUp || state == NPCChasing && suspicion >= alertDown:
		want = NPCChasing
	case suspicion >= alertUp || state >= NPCAlert && suspicion >= alertDown:
		want = NPCAlert
	case suspicion >= suspiciousUp || state >= NPCSuspicious && suspicion >= suspiciousDown:
		want = NPCSuspicious
	default:
		want = NPCIdle
	}
	switch {
	case want > state:
		return state + 1
	case want < state:
		return state - 1
	}
	return state
}

// inFieldOfView reports whether the offset (dx, dy) lies within 60° of the facing
// direction (fx, fy): cos(angle) ≥ 1/2, tested as 2·(f·d) ≥ |f|·|d| in integers.
func inFieldOfView(fx, fy int8, dx, dy int64) bool {
	if dx == 0 && dy == 0 {
		return true
	}
	f2 := int64(fx)*int64(fx) + int64(fy)*int64(fy)
	if f2 == 0 {
		return true // standing still: it looks around
	}
	dot := int64(fx)*dx + int64(fy)*dy
	if dot <= 0 {
		return false
	}
	// (2·dot)² ≥ |f|²·|d|², scaled down to stay within int64 for map-sized offsets.
	d2 := dx*dx + dy*dy
	return 4*dot*dot/f2 >= d2
}

// chase walks a chasing NPC one tick toward its target.
func (s *State) chase(slot int32, e *Entity) {
	pc := &s.perceivers[slot]
	if !s.isPlayer(pc.target, pc.targetID) {
		return
	}
	t := s.Entities[pc.target].Pos
	dx, dy := int64(t.X-e.Pos.X), int64(t.Y-e.Pos.Y)
	if dx*dx+dy*dy <= 4*BodyRadius*BodyRadius {
		return // caught up: it stands by its target
	}
	e.DX, e.DY = Direction(dx, dy)
	vx, vy := Velocity(e.DX, e.DY, s.opts.NPCSpeed)
	e.Pos = s.colliders.slide(e.Pos, Displacement(vx, s.tick, s.opts.TickHz), Displacement(vy, s.tick, s.opts.TickHz))
	e.Facing = FacingOf(e.DX, e.DY)
}

// Direction scales the offset (dx, dy) to a direction whose components lie in
// [-MaxDir, MaxDir], keeping its angle as closely as integers allow.
func Direction(dx, dy int64) (int8, int8) {
	m := max(abs64(dx), abs64(dy))
	if m == 0 {
		return 0, 0
	}
	return int8(dx * MaxDir / m), int8(dy * MaxDir / m)
}

// FacingOf returns the facing of direction (dx, dy) in 1/256 turns counter-clockwise
// from east, with integer math (a piecewise-linear arctangent, within 1.5° of the true
// angle); (0, 0) faces east.
func FacingOf(dx, dy int8) uint8 {
	x, y := int32(dx), int32(dy)
	if x == 0 && y == 0 {
		return 0
	}
	ax, ay := x, y
	if ax < 0 {
		ax = -ax
	}
	if ay < 0 {
		ay = -ay
	}
	// Angle in [0, 32] (an eighth of a turn) of the smaller over the larger component.
	var a int32
	if ax >= ay {
		a = ay * 32 / ax
	} else {
		a = 64 - ax*32/ay
	}
	switch {
	case x >= 0 && y >= 0:
		return uint8(a)
	case x < 0 && y >= 0:
		return uint8(128 - a)
	case x < 0:
		return uint8(128 + a)
	default:
		return uint8(256 - a)
	}
}

// Chases returns the slot of the player the NPC in slot chases, or -1 when it chases
// nobody: a client's view keeps an NPC that chases it however crowded the view is.
func (s *State) Chases(slot int32) int32 {
	if slot < 0 || int(slot) >= len(s.Entities) || s.Entities[slot].Kind != KindNPC || s.Entities[slot].State != NPCChasing {
		return -1
	}
	pc := &s.perceivers[slot]
	if !s.isPlayer(pc.target, pc.targetID) {
		return -1
	}
	return pc.target
}
