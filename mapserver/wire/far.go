package wire

// Distant entities sampled (see docs/netcode.md, "Distant entities"): how often a slot
// seen from afar has its movement refreshed, in a client's snapshots and in ticks.

// SetFarEvery sets how many snapshots apart an entity seen from afar has its movement
// sent (DefaultFarEvery at first); k <= 1 sends it every snapshot, like a near one.
// It takes effect at the next Begin.
func (e *Encoder) SetFarEvery(k int) {
	e.farEvery = uint32(max(k, 1))
	e.farTicks = max(1, uint32((int(e.farEvery)*e.tickHz+e.snapshotHz/2)/e.snapshotHz))
}

// SetRates says how many ticks (as Begin counts them) a second holds and how many
// snapshots a second each client is sent: 1 and 1 at first, one snapshot a tick. A
// map that builds each client's snapshot every second tick, some clients at one tick
// and the rest at the next, begins a table every tick: a distant entity is then
// sampled every farEvery*tickHz/snapshotHz ticks, so that each client still sees it
// move once in farEvery of its snapshots, and the encoder keeps tables for as many
// ticks as its ring's snapshots span. Call it before the first Begin.
func (e *Encoder) SetRates(tickHz, snapshotHz int) {
	if tickHz < 1 || snapshotHz < 1 || e.cur >= 0 {
		return
	}
	e.tickHz, e.snapshotHz = tickHz, snapshotHz
	e.SetFarEvery(int(e.farEvery))
	if n := e.ring * ((tickHz + snapshotHz - 1) / snapshotHz); n > len(e.hist) {
		e.hist = make([]table, n)
	}
}

// FarEvery returns how many snapshots apart an entity seen from afar has its movement
// sent.
func (e *Encoder) FarEvery() int { return int(e.farEvery) }

// refreshed reports whether slot s's sampled state was refreshed at a tick in
// (since, now]: whether one of its refresh ticks, those where tick+s is a multiple of
// farTicks, lies there. A table at or after such a tick took the slot's state then.
func (e *Encoder) refreshed(s uint16, since, now uint32) bool {
	f := uint64(e.farTicks)
	return (uint64(now)+uint64(s))/f > (uint64(since)+uint64(s))/f
}
