package sim

// Items in the world: entities of KindItem that never move. The simulation only holds
// them (their slot, position, template and flags) so that the area of interest and the
// snapshots carry them like any entity; what an item is and who may take it is decided
// by the game with the rules of mapserver/kernel/items.

// AddItem puts an item of wire template number template at pos (clamped into the
// bounds) and returns its slot and stable id.
func (s *State) AddItem(pos Vec, template uint32) (int32, EntityID) {
	w, h := s.colliders.Bounds()
	pos.X = max(0, min(pos.X, w))
	pos.Y = max(0, min(pos.Y, h))
	slot := s.alloc()
	id := s.nextID
	s.nextID++
	s.Entities[slot] = Entity{ID: id, Kind: KindItem, Pos: pos, Template: template}
	s.items++
	return slot, id
}

// RemoveItem frees an item's slot; false if slot holds no item.
func (s *State) RemoveItem(slot int32) bool {
	if !s.isItem(slot) {
		return false
	}
	s.Entities[slot] = Entity{}
	s.free = append(s.free, slot)
	s.items--
	return true
}

// SetItemPending marks an item as awaiting the orchestrator's durable ack of a change
// of owner (on), or as free again (off); false if slot holds no item.
func (s *State) SetItemPending(slot int32, on bool) bool {
	if !s.isItem(slot) {
		return false
	}
	if on {
		s.Entities[slot].State |= ItemPending
	} else {
		s.Entities[slot].State &^= ItemPending
	}
	return true
}

// ItemCount is the number of items in the world.
func (s *State) ItemCount() int { return s.items }

// isItem reports whether slot holds an item.
func (s *State) isItem(slot int32) bool {
	return slot >= 0 && int(slot) < len(s.Entities) && s.Entities[slot].Kind == KindItem
}
