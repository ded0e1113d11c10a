package wire

// Update records shared between the clients of one round (see docs/netcode.md, "Update
// records are made once per entity, not once per viewer").

// sharedRecord is the update record of one slot between a baseline and the current
// table, as a client seeing the slot near at both is sent it, but for the slot gap,
// which depends on the client's other slots. Clients that see one entity mostly
// acknowledged the same snapshot, so the first of them to need a slot's record makes
// it and the rest copy it: comparing the two states and writing the deltas is then
// done once per entity and round rather than once per viewer. A slot seen from afar is
// not shared: its sampled state changes one snapshot in farEvery, and comparing two
// equal states costs less than looking a record up.
type sharedRecord struct {
	gen  uint32 // Encoder.gen when made; records of another gen are stale
	base uint32 // the baseline's tick
	// what is 0 (the same state: no record), spawnRecord (another entity holds the
	// slot), or the update bits of the record; body[:n] follows the slot gap.
	what uint8
	n    uint8
	body [maxUpdateBody]byte
}

// maxUpdateBody bounds what follows an update record's slot gap: two coordinate deltas
// (zigzag varints of at most 33 bits, 5 bytes each) and the state fields behind their
// mask (1 + 1 + 1 + a template of at most 5 bytes).
const maxUpdateBody = 5 + 5 + 8

// spawnRecord marks a shared record whose slot holds another entity than at the
// baseline: the client is sent a spawn record instead.
const spawnRecord = 1 << 7

// secondWay marks, above the slot and the far bits of a record in the encoder's
// scratch, an update whose shared record is the second of its slot's two.
const (
	secondWay      = 1 << secondWayShift
	secondWayShift = 18
)

// sharedIndex is the index in Encoder.shared of slot s's record in way (0 or
// secondWay).
func sharedIndex(s uint16, way uint32) int { return 2*int(s) + int(way>>secondWayShift) }

// record returns slot s's shared record from base to cur, seen near at both, and which
// of the slot's two it is (0 or secondWay), making it if no client made it for this
// baseline since the tables last changed. s lies in both tables.
func (e *Encoder) record(base, cur *table, s uint16) (*sharedRecord, uint32) {
	first, second := &e.shared[sharedIndex(s, 0)], &e.shared[sharedIndex(s, secondWay)]
	switch {
	case first.gen == e.gen && first.base == base.tick:
		return first, 0
	case second.gen == e.gen && second.base == base.tick:
		return second, secondWay
	}
	// A baseline of its own: in the first way unless another baseline of this round
	// holds it, else in the second (a third baseline takes the second's place).
	sr, way := first, uint32(0)
	if first.gen == e.gen {
		sr, way = second, secondWay
	}
	sr.gen, sr.base, sr.what, sr.n = e.gen, base.tick, 0, 0
	switch b, n := &base.slots[s].now, &cur.slots[s].now; {
	case b.ID != n.ID:
		sr.what = spawnRecord
	case *b != *n:
		body, m := updateBody(sr.body[:0], b, n)
		sr.what, sr.n = uint8(m), uint8(len(body))
	}
	return sr, way
}
