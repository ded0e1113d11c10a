package wire

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// Snapshot frame format (see docs/netcode.md for the byte-by-byte layout).
const (
	// FormatVersion is the snapshot format this package encodes and decodes; a frame's
	// first byte is FormatVersion<<1 | delta flag. Format 2 added the entity state
	// fields (Facing, State, Template) to format 1's positions; the welcome names it.
	FormatVersion = 2
	// MaxSlots bounds entity slots: slots lie in [0, MaxSlots).
	MaxSlots = 1 << 16
	// MaxCoord bounds the magnitude of a position coordinate in quanta.
	MaxCoord = 1 << 30
	// DefaultRing is how many snapshots a client's baseline ring keeps: about 2 s at
	// 15 snapshots per second. A client whose newest ack is older gets a full snapshot.
	DefaultRing = 32
	// DefaultClientRing is how many snapshots the server remembers having sent one
	// client, so how old an acknowledged baseline may be: about 1 s at 15 snapshots per
	// second, several round trips of any live connection. An older ack gets a full
	// snapshot. Every connected client holds this ring (the slots each snapshot
	// showed), so it is kept short; a map's encoder keeps the shared tables of as many
	// snapshots of one client (twice as many tables when each client's snapshot comes
	// every second tick, see Encoder.SetRates), since an older one would never be a
	// baseline.
	DefaultClientRing = 16
	// DefaultFarEvery is how many snapshots apart a distant entity's movement reaches a
	// client (see Encoder.EncodeFar): 12, so 1.25 times a second at 15 snapshots per
	// second, which a client interpolates over.
	DefaultFarEvery = 12
	// Bits of an update record's low three bits: what follows the slot gap.
	updateDX     = 1 << 0
	updateDY     = 1 << 1
	updateFields = 1 << 2
	updateBits   = 3
	// Bits of a field mask (spawn and update records): which state fields follow, in
	// bit order. A decoder refuses bits beyond knownFields, so a later format that adds
	// a field is refused clearly rather than misread.
	fieldFacing   = 1 << 0
	fieldState    = 1 << 1
	fieldTemplate = 1 << 2
	knownFields   = fieldFacing | fieldState | fieldTemplate
)

// Entity kinds of snapshots (docs/netcode.md, "Entity kinds"): what a client draws an
// entity as when it knows nothing else of the game. Kinds 1 to 3 are the simulation's
// (sim.Kind); a game may send any other, and a client draws a kind it does not know as
// a plain disc.
const (
	EntityPlayer uint8 = 1
	EntityNPC    uint8 = 2
	EntityItem   uint8 = 3
	// EntityZone is an area that does not move: a disc of Template centimetres radius,
	// tinted by State (0 neutral, 1 and up a colour of the game's).
	EntityZone uint8 = 4
)

// A player's State flags, which clients draw whatever the game: a game gives them its
// own meaning (in tag, the player who is "it" is marked and a player who cannot be
// tagged now is shielded).
const (
	PlayerMarked   uint8 = 1 << 0
	PlayerShielded uint8 = 1 << 1
)

// EntityState is what the snapshot carries of one entity: its stable id and kind
// (sent once, in the spawn record), its position in quanta (1/16 unit), and the
// kind-specific state a client draws and predicts it with. Zero state fields cost
// nothing on the wire; a field that changes costs its new value once.
type EntityState struct {
	ID   uint64
	X, Y int32
	// Template is an item's template id, a zone's radius in centimetres; 0 for other
	// kinds.
	Template uint32
	Kind     uint8
	// Facing is the direction the entity looks, in 1/256 turns counter-clockwise from
	// east.
	Facing uint8
	// State is kind-specific: a player's flags (PlayerMarked, PlayerShielded), an
	// NPC's perception state (idle 0, suspicious 1, alert 2, chasing 3), an item's flags
	// (bit 0 pending), a zone's colour.
	State uint8
}

// fields returns the field mask of s's non-zero state fields.
func (s *EntityState) fields() uint64 {
	var m uint64
	if s.Facing != 0 {
		m |= fieldFacing
	}
	if s.State != 0 {
		m |= fieldState
	}
	if s.Template != 0 {
		m |= fieldTemplate
	}
	return m
}

// changed returns the field mask of the state fields that differ between b and n.
func changed(b, n *EntityState) uint64 {
	var m uint64
	if b.Facing != n.Facing {
		m |= fieldFacing
	}
	if b.State != n.State {
		m |= fieldState
	}
	if b.Template != n.Template {
		m |= fieldTemplate
	}
	return m
}

// appendFields appends the mask and then the fields of s it names, in bit order.
func appendFields(dst []byte, mask uint64, s *EntityState) []byte {
	dst = binary.AppendUvarint(dst, mask)
	if mask&fieldFacing != 0 {
		dst = append(dst, s.Facing)
	}
	if mask&fieldState != 0 {
		dst = append(dst, s.State)
	}
	if mask&fieldTemplate != 0 {
		dst = binary.AppendUvarint(dst, uint64(s.Template))
	}
	return dst
}

// table is the state of every slot at one snapshot tick; ID 0 marks an empty slot.
type table struct {
	tick  uint32
	valid bool
	slots []slotState
}

// slotState is one slot's state now and its sampled state, far: what a client is shown
// of an entity it sees from afar. far has the slot's position and facing as of the
// slot's last refresh (one snapshot in farEvery, staggered by slot), its other fields
// as now, and all of now at once when another entity takes the slot. The two lie side
// by side: the distance that decides reads now, a near client now, a far one far, and
// one or two cache lines serve all three.
type slotState struct {
	now, far EntityState
}

// state returns the state of slot s a client is shown, sampled if it sees s from afar.
func (t *table) state(s uint16, far bool) *EntityState {
	if far {
		return &t.slots[s].far
	}
	return &t.slots[s].now
}

// settled reports whether slot s's sampled state is its current one, so that a client
// can start seeing it from afar without seeing it step back.
func (t *table) settled(s uint16) bool {
	return t.slots[s].far == t.slots[s].now
}

// Encoder builds the snapshot frames of one map. Each snapshot tick the loop calls
// Begin, then Set once per entity (the state every client's frame reads), then Encode
// once per client with that client's visible slots. The encoder keeps the last Ring
// tick tables shared by all clients; a client keeps only which slots it saw at each
// tick, so a delta against any acknowledged tick still in both rings costs no copy of
// entity state per client. Nothing allocates in steady state: tables and rings are
// reused, and Encode appends to the caller's buffer.
//
// An Encoder and its Clients are not safe for concurrent use: the Encode calls of one
// tick share the encoder's scratch.
type Encoder struct {
	hist []table
	cur  int
	// scratch of one Encode, shared by every client (so a connected client holds none
	// of it): near and far visible slots as bitsets, and the records of one frame
	// (spawns and updates with the recordFar and baseFar bits)
	mark, farMark   []uint64
	despawns        []uint16
	spawns, updates []uint32
	// farEvery is how many of a client's snapshots apart a slot's sampled state is
	// refreshed, farTicks how many ticks that is (see SetRates); ring is the client
	// snapshots a baseline may lie back, tickHz and snapshotHz the rates.
	farEvery, farTicks uint32
	ring               int
	tickHz, snapshotHz int
	// shared holds, two by slot (for two baselines), the near update records of the
	// current table made so far, for the next client with the same baseline (see
	// sharedRecord); gen tells them apart from the records of tables changed since.
	shared []sharedRecord
	gen    uint32
}

// NewEncoder returns an encoder keeping the tables of ring snapshots of a client
// (DefaultRing if ring <= 0): ring tables at one snapshot a tick, more after SetRates.
func NewEncoder(ring int) *Encoder {
	if ring <= 0 {
		ring = DefaultRing
	}
	e := &Encoder{hist: make([]table, ring), cur: -1, ring: ring, tickHz: 1, snapshotHz: 1}
	e.SetFarEvery(DefaultFarEvery)
	return e
}

// Begin starts the snapshot of tick, which must be above the previous one. Slots not
// Set before the next Begin are empty at tick.
func (e *Encoder) Begin(tick uint32) {
	e.cur = (e.cur + 1) % len(e.hist)
	t := &e.hist[e.cur]
	t.tick, t.valid = tick, true
	clear(t.slots)
	e.gen++
}

// Set records the state of slot at the current tick. Slots outside [0, MaxSlots) and
// zero ids are ignored.
func (e *Encoder) Set(slot int32, s EntityState) {
	if e.cur < 0 || slot < 0 || slot >= MaxSlots || s.ID == 0 {
		return
	}
	t := &e.hist[e.cur]
	e.gen++ // records shared so far may show the slot's earlier state
	if int(slot) >= len(t.slots) {
		t.slots = slices.Grow(t.slots, int(slot)+1-len(t.slots))[:slot+1]
	}
	t.slots[slot].now = s
	// The sampled state keeps the previous table's position and facing but on the
	// slot's refresh, once every farTicks ticks; a slot's phase is its number, so the
	// refreshes of a crowd spread evenly over the ticks.
	if prev := &e.hist[(e.cur+len(e.hist)-1)%len(e.hist)]; prev.valid && int(slot) < len(prev.slots) && !e.refreshed(uint16(slot), prev.tick, t.tick) {
		if p := &prev.slots[slot].far; p.ID == s.ID {
			s.X, s.Y, s.Facing = p.X, p.Y, p.Facing
		}
	}
	t.slots[slot].far = s
}

// find returns the table of tick, or nil when it left the ring.
func (e *Encoder) find(tick uint32) *table {
	for i := range e.hist {
		if t := &e.hist[i]; t.valid && t.tick == tick {
			return t
		}
	}
	return nil
}

// sent is one snapshot sent to a client: its tick and the sorted visible slots.
type sent struct {
	tick  uint32
	valid bool
	set   *slotSet
	// far has bit i set when the snapshot showed set.slots[i] from afar (its sampled
	// state). It is the record's own, reused from one snapshot to the next: in a crowd
	// whose view is split near and far, which slots are far changes on more snapshots
	// than the slots do, and the shared set would be copied each time.
	far []uint64
}

// slotSet is the sorted visible slots of one or more consecutive snapshots of a
// client. A view rarely changes from one snapshot to the next, so records that show
// the same slots share one set instead of each holding a copy: a client's ring then
// costs about one set, not one per record. A set is never changed while referenced.
type slotSet struct {
	slots []uint16 // fit: slots lie below MaxSlots
	refs  int
}

// isFar reports whether bit i of far, a record's far bits, is set.
func isFar(far []uint64, i int) bool { return far[i>>6]&(1<<(i&63)) != 0 }

// same reports whether s and o show the same slots.
func (s *slotSet) same(o *slotSet) bool { return slices.Equal(s.slots, o.slots) }

// keptSets bounds the released sets a client keeps for reuse.
const keptSets = 2

// Client is one client's side of the encoder: the snapshots recently sent to it and
// the newest tick it acknowledged.
type Client struct {
	// lastFar is, by slot, what the last snapshot showed from afar.
	lastFar []uint64

	ring   []sent
	free   []*slotSet // released sets, for reuse
	next   int
	acked  uint32
	hasAck bool
}

// NewClient returns the state of a new client, which gets a full snapshot until it
// acknowledges one; ring records (DefaultClientRing if ring <= 0), at most the
// encoder's ring.
func NewClient(ring int) *Client {
	if ring <= 0 {
		ring = DefaultClientRing
	}
	ring = max(ring, 2) // a record is compared with the one before it
	return &Client{ring: make([]sent, ring)}
}

// Ack records that the client received the snapshot of tick. Acks of ticks never sent
// to it, or older than its newest ack, are ignored (false).
func (c *Client) Ack(tick uint32) bool {
	if c.hasAck && tick <= c.acked || c.find(tick) == nil {
		return false
	}
	c.acked, c.hasAck = tick, true
	return true
}

// Reset forgets the client's acks, so that its next snapshot is full (a resumed
// connection whose decoder starts empty).
func (c *Client) Reset() {
	c.hasAck = false
	for i := range c.ring {
		c.release(&c.ring[i])
	}
}

// find returns the record of tick, or nil. It looks from the newest record back: a
// client acknowledges what it was sent last, so the first or second look finds it, and
// the rest of the ring stays out of the cache.
func (c *Client) find(tick uint32) *sent {
	n := len(c.ring)
	for i := 1; i <= n; i++ {
		if s := &c.ring[(c.next+n-i)%n]; s.valid && s.tick == tick {
			return s
		}
	}
	return nil
}

// Bits of a spawn or update record in the encoder's scratch above the slot number.
const (
	recordFar = 1 << 16 // the frame shows the slot's sampled state
	baseFar   = 1 << 17 // the baseline showed the slot's sampled state
)

// Encode appends the current tick's snapshot for client c to dst: a delta against the
// newest snapshot c acknowledged when both the encoder and c still hold it, a full
// snapshot otherwise (full reports which). seq is the last input seq applied for the
// client's player, self its own slot (-1 for none), and visible the slots it sees
// (any order; empty slots and duplicates are skipped). Encode must follow Begin.
func (e *Encoder) Encode(dst []byte, c *Client, seq uint64, self int32, visible []int32) (out []byte, full bool) {
	return e.EncodeFar(dst, c, seq, self, visible, nil)
}

// EncodeFar is Encode with the client's view split in two: near, the slots it sees
// every change of, and far, the slots it sees from afar, whose movement (position and
// facing) it is sent once every farEvery snapshots, staggered by slot; their other
// fields, spawns and despawns reach it at once. A slot in both lists is near. A slot
// turns far only on a snapshot where its sampled state is its current one, so no
// client sees an entity step back.
func (e *Encoder) EncodeFar(dst []byte, c *Client, seq uint64, self int32, near, far []int32) (out []byte, full bool) {
	cur := e.current()
	e.marks(c, cur)
	markOccupied(e.mark, cur, near)
	markOccupied(e.farMark, cur, far)
	return e.encode(dst, c, seq, self, cur, len(near)+len(far))
}

// EncodeWithin is EncodeFar with the split made here, from the positions of the
// current tick: the visible slots farther than radius (quanta) from self are far, but
// for those in pinned. radius <= 0, or no self, makes every slot near.
func (e *Encoder) EncodeWithin(dst []byte, c *Client, seq uint64, self int32, visible []int32, radius int32, pinned []int32) (out []byte, full bool) {
	cur := e.current()
	e.marks(c, cur)
	if radius <= 0 || self < 0 || int(self) >= len(cur.slots) || cur.slots[self].now.ID == 0 {
		markOccupied(e.mark, cur, visible)
		return e.encode(dst, c, seq, self, cur, len(visible))
	}
	me := &cur.slots[self].now
	r2 := int64(radius) * int64(radius)
	for _, s := range visible {
		if s < 0 || int(s) >= len(cur.slots) || cur.slots[s].now.ID == 0 {
			continue
		}
		p := &cur.slots[s].now
		dx, dy := int64(p.X)-int64(me.X), int64(p.Y)-int64(me.Y)
		if dx*dx+dy*dy > r2 {
			e.farMark[s>>6] |= 1 << (s & 63)
		} else {
			e.mark[s>>6] |= 1 << (s & 63)
		}
	}
	for _, s := range pinned {
		if s >= 0 && int(s) < len(cur.slots) && e.farMark[s>>6]&(1<<(s&63)) != 0 {
			e.mark[s>>6] |= 1 << (s & 63) // near wins
		}
	}
	return e.encode(dst, c, seq, self, cur, len(visible))
}

// current returns the current tick's table, beginning tick 0 if none was begun.
func (e *Encoder) current() *table {
	if e.cur < 0 {
		e.Begin(0)
	}
	return &e.hist[e.cur]
}

// encode writes the snapshot of cur for c, whose visible slots (about n of them) are
// marked in e.mark (near) and e.farMark (far).
func (e *Encoder) encode(dst []byte, c *Client, seq uint64, self int32, cur *table, n int) (out []byte, full bool) {
	last := &c.ring[(c.next+len(c.ring)-1)%len(c.ring)] // the record written before
	rec := &c.ring[c.next]
	c.next = (c.next + 1) % len(c.ring)
	var base *table
	var baseRec *sent
	if c.hasAck {
		// A baseline about to be overwritten by this snapshot's record is unusable.
		if s := c.find(c.acked); s != nil && s != rec && s.tick != cur.tick {
			if t := e.find(c.acked); t != nil {
				base, baseRec = t, s
			}
		}
	}
	if rec.valid && c.hasAck && rec.tick == c.acked {
		c.hasAck = false
	}
	// Record what this snapshot shows, sorted and deduplicated, in the client's ring:
	// mark the visible slots in a bitset and read it back in order, which costs far
	// less than sorting.
	var lastSet *slotSet
	var lastTick uint32
	if last.valid {
		lastSet, lastTick = last.set, last.tick
	}
	c.release(rec)
	set := c.newSet()
	rec.far = e.viewSorted(c, set, rec.far[:0], cur, n, lastSet != nil, lastTick)
	if lastSet != nil && lastSet.same(set) {
		c.free = append(c.free, set)
		set = lastSet
	}
	set.refs++
	rec.tick, rec.valid, rec.set = cur.tick, true, set
	if full = base == nil; full {
		baseRec = nil
	}
	e.classify(base, cur, baseRec, rec)

	if full {
		dst = append(dst, FormatVersion<<1)
		dst = binary.AppendUvarint(dst, uint64(cur.tick))
	} else {
		dst = append(dst, FormatVersion<<1|1)
		dst = binary.AppendUvarint(dst, uint64(cur.tick))
		dst = binary.AppendUvarint(dst, uint64(cur.tick-base.tick))
	}
	dst = binary.AppendUvarint(dst, seq)
	if self < 0 || self >= MaxSlots {
		self = -1
	}
	dst = binary.AppendUvarint(dst, uint64(self+1))

	dst = binary.AppendUvarint(dst, uint64(len(e.despawns)))
	prev := int32(-1)
	for _, s := range e.despawns {
		dst = binary.AppendUvarint(dst, uint64(int32(s)-prev-1))
		prev = int32(s)
	}

	dst = binary.AppendUvarint(dst, uint64(len(e.spawns)))
	prev = -1
	for _, r := range e.spawns {
		s := uint16(r)
		st := cur.state(s, r&recordFar != 0)
		dst = binary.AppendUvarint(dst, uint64(int32(s)-prev-1))
		dst = append(dst, st.Kind)
		dst = binary.AppendUvarint(dst, st.ID)
		dst = binary.AppendVarint(dst, int64(st.X))
		dst = binary.AppendVarint(dst, int64(st.Y))
		dst = appendFields(dst, st.fields(), st)
		prev = int32(s)
	}

	// Updates: the slot gap with what follows in its low three bits, then the zigzag
	// deltas of the changed coordinates, then the changed state fields behind their
	// mask. Entities at rest cost nothing.
	dst = binary.AppendUvarint(dst, uint64(len(e.updates)))
	prev = -1
	var body [maxUpdateBody]byte
	for _, r := range e.updates {
		s := uint16(r)
		gap := uint64(int32(s)-prev-1) << updateBits
		prev = int32(s)
		if r&(recordFar|baseFar) == 0 {
			sr := &e.shared[sharedIndex(s, r&secondWay)] // made by classify for this Encode
			dst = binary.AppendUvarint(dst, gap|uint64(sr.what))
			dst = append(dst, sr.body[:sr.n]...)
			continue
		}
		b, m := updateBody(body[:0], base.state(s, r&baseFar != 0), cur.state(s, r&recordFar != 0))
		dst = binary.AppendUvarint(dst, gap|m)
		dst = append(dst, b...)
	}
	return dst, full
}

// updateBody appends what follows an update record's slot gap from b to n (the
// coordinates' zigzag deltas, then the changed state fields behind their mask) and
// returns it with the record's update bits.
func updateBody(dst []byte, b, n *EntityState) ([]byte, uint64) {
	var m uint64
	if b.X != n.X {
		m |= updateDX
		dst = binary.AppendVarint(dst, int64(n.X)-int64(b.X))
	}
	if b.Y != n.Y {
		m |= updateDY
		dst = binary.AppendVarint(dst, int64(n.Y)-int64(b.Y))
	}
	if fields := changed(b, n); fields != 0 {
		m |= updateFields
		dst = appendFields(dst, fields, n)
	}
	return dst, m
}

// release forgets a record, keeping its set for reuse once no record refers to it.
func (c *Client) release(r *sent) {
	if r.set != nil {
		if r.set.refs--; r.set.refs == 0 && len(c.free) < keptSets {
			c.free = append(c.free, r.set)
		}
	}
	r.valid, r.set = false, nil
}

// newSet returns an unreferenced set: a released one, or a new one.
func (c *Client) newSet() *slotSet {
	if n := len(c.free); n > 0 {
		set := c.free[n-1]
		c.free = c.free[:n-1]
		return set
	}
	return &slotSet{}
}

// marks makes the encoder's near and far bitsets, and c's lastFar, cover every slot of
// cur (the bitsets are all clear between two Encodes).
func (e *Encoder) marks(c *Client, cur *table) {
	words := (len(cur.slots) + 63) / 64
	if len(e.mark) < words {
		e.mark, e.farMark = make([]uint64, words), make([]uint64, words)
	}
	if len(c.lastFar) < words {
		c.lastFar = append(c.lastFar, make([]uint64, words-len(c.lastFar))...)
	}
	if n := 2 * len(cur.slots); len(e.shared) < n {
		e.shared = append(e.shared, make([]sharedRecord, n-len(e.shared))...)
	}
}

// viewSorted fills set with the slots marked in the encoder's bitsets (about n),
// sorted, and clears the bitsets. It returns the far ones as bits by position in set,
// appended to farBits (a record's, reused): those only in the far bitset
// that the client saw from afar in its last snapshot (if last, there is one, of
// lastTick: lastFar), whose sampled state is their current one, or whose sampled
// state was taken since lastTick (what the client was last shown of them is older);
// lastFar then holds them. A slot turned far so never steps back.
func (e *Encoder) viewSorted(c *Client, set *slotSet, farBits []uint64, cur *table, n int, last bool, lastTick uint32) []uint64 {
	if cap(set.slots) < n {
		// A little room beyond this snapshot's view, so that a ring entry grows rarely
		// in a view that only changes by a few entities.
		set.slots = make([]uint16, 0, n+n/8+8)
	}
	if words := (cap(set.slots) + 63) / 64; cap(farBits) < words {
		farBits = make([]uint64, 0, words)
	}
	words := (len(cur.slots) + 63) / 64
	slots := set.slots[:0]
	for w := range words {
		m, f := e.mark[w]|e.farMark[w], e.farMark[w]&^e.mark[w]
		was := c.lastFar[w]
		if !last {
			was = 0
		}
		var now uint64
		for m != 0 {
			b := bits.TrailingZeros64(m)
			m &= m - 1
			s := uint16(w*64 + b)
			i := len(slots)
			slots = append(slots, s)
			if i&63 == 0 {
				farBits = append(farBits, 0)
			}
			if f&(1<<b) == 0 {
				continue
			}
			if was&(1<<b) != 0 || cur.settled(s) || last && e.refreshed(s, lastTick, cur.tick) {
				farBits[i>>6] |= 1 << (i & 63)
				now |= 1 << b
			}
		}
		e.mark[w], e.farMark[w], c.lastFar[w] = 0, 0, now
	}
	// Slots beyond this table's were empty: nothing of them was shown.
	clear(c.lastFar[words:])
	set.slots = slots
	return farBits
}

// markOccupied sets the bits of the occupied slots of list in mark.
func markOccupied(mark []uint64, cur *table, list []int32) {
	for _, s := range list {
		if s >= 0 && int(s) < len(cur.slots) && cur.slots[s].now.ID != 0 {
			mark[s>>6] |= 1 << (s & 63)
		}
	}
}

// classify splits the slots seen at the baseline (was, nil for none) and now into
// despawns (seen, no longer visible), spawns (newly visible, or holding another entity
// than at the baseline) and updates (the same entity, moved or changed as the client
// sees it, near or from afar), in the client's scratch lists.
func (e *Encoder) classify(base, cur *table, was, now *sent) {
	e.despawns, e.spawns, e.updates = e.despawns[:0], e.spawns[:0], e.updates[:0]
	var wasSlots []uint16
	if was != nil {
		wasSlots = was.set.slots
	}
	i := 0
	for k, s := range now.set.slots {
		for i < len(wasSlots) && wasSlots[i] < s {
			e.despawns = append(e.despawns, wasSlots[i])
			i++
		}
		r := uint32(s)
		if isFar(now.far, k) {
			r |= recordFar
		}
		if i == len(wasSlots) || wasSlots[i] != s {
			e.spawns = append(e.spawns, r)
			continue
		}
		if isFar(was.far, i) {
			r |= baseFar
		}
		i++
		if int(s) >= len(base.slots) {
			e.spawns = append(e.spawns, r)
			continue
		}
		if r&(recordFar|baseFar) == 0 {
			switch sr, way := e.record(base, cur, s); {
			case sr.what == spawnRecord:
				e.spawns = append(e.spawns, r)
			case sr.what != 0:
				e.updates = append(e.updates, r|way)
			}
			continue
		}
		// A sampled state has its slot's id, so the ids compare in the states shown: a
		// far slot costs its sampled states only.
		switch b, n := base.state(s, r&baseFar != 0), cur.state(s, r&recordFar != 0); {
		case b.ID != n.ID:
			e.spawns = append(e.spawns, r)
		case *b != *n:
			e.updates = append(e.updates, r)
		}
	}
	e.despawns = append(e.despawns, wasSlots[i:]...)
}
