package game

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// Equipment commands: `{"feature":"equipment","action":"equip","payload":{"itemId","slot"}}`
// and `{"feature":"equipment","action":"unequip","payload":{"slot"}}`, each answered
// with an "equip_result" event that carries the command's seq.
const (
	FeatureEquipment = "equipment"
	ActionEquip      = "equip"
	ActionUnequip    = "unequip"
	// EventEquipResult names the event that answers an equipment command.
	EventEquipResult = "equip_result"
)

// CodeEquipLocked refuses an equipment command on a slot changed less than
// EquipCooldownTicks ago. The other codes an equip_result carries are the item rules'
// own: items.CodeIllegalSlot, items.CodeSkillGate, items.CodeItemNotFound (the item is
// not in the character's inventory: unknown, or not its own; or the slot is empty),
// items.CodeInventoryFull (no backpack room for what the slot held).
const CodeEquipLocked = "equip_locked"

// Equipment tunables, in ticks and commands, so that the rules never read a clock.
const (
	// EquipCooldownTicks is how long a slot stays locked after it changed: half a second
	// at the default 30 Hz.
	EquipCooldownTicks = 15
	// EquipSeqWindow is how many of a character's latest equipment command seqs are
	// remembered: a seq among them is a duplicate and is ignored. The kit drops any seq
	// not above the connection's last one already; the window keeps the rule inside the
	// game too, for a command replayed after a resume.
	EquipSeqWindow = 64
)

// Character attribute keys the game reads and writes in the character's pushed state
// (record.CharacterState.Attributes, a JSON object): the skill levels that gate
// equipment, and the equipment itself, slot → item id. Equipment is not an ownership
// change (the item stays the character's), so it travels with the character's state
// rather than as a critical event; the kit pushes that state as soon as the
// equipment changes (Command's out.Save).
const (
	AttrSkills    = "skills"
	AttrEquipment = "equipment"
)

// Equip is a decoded equipment/equip command: wear or wield ItemID in Slot.
type Equip struct {
	ItemID string     `json:"itemId"`
	Slot   items.Slot `json:"slot"`
}

// Unequip is a decoded equipment/unequip command: put what Slot holds into the backpack.
type Unequip struct {
	Slot items.Slot `json:"slot"`
}

// EquipResult is the Data of an "equip_result" event: the answer to the equipment
// command Seq, an Operation ("equip" or "unequip") on Slot, which succeeded or was
// refused with Code and Message.
type EquipResult struct {
	Seq       uint64     `json:"seq"`
	Operation string     `json:"operation"`
	Slot      items.Slot `json:"slot"`
	Success   bool       `json:"success"`
	Code      string     `json:"code,omitempty"`
	Message   string     `json:"message,omitempty"`
}

// equipState is the game's equipment bookkeeping, per character. The zero value is
// ready: maps are made on first use.
type equipState struct {
	// unlock is the first tick a slot may change again.
	unlock map[string]map[items.Slot]uint64
	// seqs are a character's latest equipment command seqs, oldest first.
	seqs map[string][]uint64
	// saved is the equipment a character arrived with (its attributes), applied to its
	// inventory once the inventory is known (restoreEquipment).
	saved map[string]map[items.Slot]string
	// known marks characters whose equipment the game knows (restored, or changed by a
	// command): only theirs is written back into their state.
	known map[string]bool
}

// decodeEquipment decodes an equipment command's payload strictly.
func decodeEquipment(action string, payload json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	switch action {
	case ActionEquip:
		var c Equip
		if err := dec.Decode(&c); err != nil || !items.ValidID(c.ItemID) || c.Slot == "" || len(c.Slot) > items.MaxIDLen {
			return nil, apierr.Errorf(wire.CodeBadPayload, `equip needs {"itemId","slot"}`)
		}
		return c, nil
	case ActionUnequip:
		var c Unequip
		if err := dec.Decode(&c); err != nil || c.Slot == "" || len(c.Slot) > items.MaxIDLen {
			return nil, apierr.Errorf(wire.CodeBadPayload, `unequip needs {"slot"}`)
		}
		return c, nil
	}
	return nil, apierr.Errorf(wire.CodeUnknownCommand, "unknown command %.32q/%.32q", FeatureEquipment, action)
}

// equipCommand applies an equipment command of a character, the seq-th of its
// session, and returns the "equip_result" frame to send it and whether its equipment
// changed. A seq among the character's last EquipSeqWindow is a duplicate: nothing is
// applied and no frame is returned. Checks, in order: the slot exists (illegal_slot),
// the slot is not locked (equip_locked), the item is in the inventory (item_not_found),
// it is made for that slot (illegal_slot), the character's skill (skill_gate), backpack
// room for what the slot held (inventory_full). A change locks the slot for
// EquipCooldownTicks.
func (g *Game) equipCommand(characterID string, seq uint64, cmd any) (result []byte, changed bool) {
	var op string
	var slot items.Slot
	switch c := cmd.(type) {
	case Equip:
		op, slot = ActionEquip, c.Slot
	case Unequip:
		op, slot = ActionUnequip, c.Slot
	default:
		return nil, false
	}
	if _, here := g.slots[characterID]; !here {
		return nil, false
	}
	if g.equip.duplicate(characterID, seq) {
		return nil, false
	}
	res := EquipResult{Seq: seq, Operation: op, Slot: slot}
	if err := g.applyEquip(characterID, cmd); err != nil {
		res.Code, res.Message = apierr.Code(err), apierr.Message(err)
	} else {
		res.Success = true
	}
	b, _ := json.Marshal(wire.Event{V: wire.Version, Kind: wire.KindEvent, Name: EventEquipResult, Data: res})
	return b, res.Success
}

// applyEquip checks and applies one equipment command.
func (g *Game) applyEquip(characterID string, cmd any) error {
	var slot items.Slot
	switch c := cmd.(type) {
	case Equip:
		slot = c.Slot
	case Unequip:
		slot = c.Slot
	}
	if !isEquipSlot(slot) {
		return apierr.Errorf(items.CodeIllegalSlot, "no equipment slot %.32q", slot)
	}
	tick := g.state.Tick()
	if until := g.equip.unlock[characterID][slot]; tick < until {
		return apierr.Errorf(CodeEquipLocked, "%s changed just now; it can change again in %d ticks", slot, until-tick)
	}
	inv := g.Inventory(characterID)
	var err error
	switch c := cmd.(type) {
	case Equip:
		if _, locked := g.items.locked[c.ItemID]; locked {
			return apierr.Errorf(CodeItemPending, "that item is being traded or changing hands")
		}
		err = inv.Equip(g.items.catalog, c.ItemID, slot, g.skills(characterID))
	case Unequip:
		err = inv.Unequip(slot)
	}
	if err != nil {
		return refusal(err)
	}
	g.equip.lock(characterID, slot, tick+EquipCooldownTicks)
	g.equip.mark(characterID)
	g.equipmentChanged(characterID)
	return nil
}

// equipmentChanged is called after a character's equipment changed. Equipment weighs
// what it weighed in the backpack, so the character's speed stays; the owner's
// "inventory" event (which lists the equipment) is sent from here wherever the game
// sends inventory events.
func (g *Game) equipmentChanged(characterID string) { g.touch(characterID) }

// skills returns a character's skill levels: the "skills" object of its attributes
// ({"melee":2,...}); none for a character without them or with a malformed one.
func (g *Game) skills(characterID string) map[string]int {
	var a struct {
		Skills map[string]int `json:"skills"`
	}
	if raw := g.attrs[characterID]; len(raw) > 0 {
		_ = json.Unmarshal(raw, &a) // malformed attributes: no skills, every gate closed
	}
	return a.Skills
}

// rememberEquipment keeps the equipment a spawning character's attributes name, to
// restore once its inventory is known.
func (g *Game) rememberEquipment(characterID string, attrs json.RawMessage) {
	var a struct {
		Equipment map[items.Slot]string `json:"equipment"`
	}
	if len(attrs) == 0 || json.Unmarshal(attrs, &a) != nil || len(a.Equipment) == 0 {
		return
	}
	if g.equip.saved == nil {
		g.equip.saved = make(map[string]map[items.Slot]string)
	}
	g.equip.saved[characterID] = a.Equipment
}

// restoreEquipment puts the items a character arrived wearing back into their slots,
// once its inventory holds what the orchestrator says it owns: an item it no longer
// holds, that does not fit the slot, or that its skills no longer allow, stays in the
// backpack; cooldowns do not apply (nothing changed by command). Call it whenever
// a character's inventory is (re)built from the orchestrator.
func (g *Game) restoreEquipment(characterID string) {
	inv := g.Inventory(characterID)
	saved := g.equip.saved[characterID]
	slots := make([]items.Slot, 0, len(saved))
	for s := range saved {
		slots = append(slots, s)
	}
	slices.Sort(slots) // a stable order, so two restores of the same state agree
	skills := g.skills(characterID)
	for _, s := range slots {
		if isEquipSlot(s) {
			_ = inv.Equip(g.items.catalog, saved[s], s, skills) // refused: left in the backpack
		}
	}
	delete(g.equip.saved, characterID)
	g.equip.mark(characterID)
	// No inventory event: the arrival's welcome is followed by one already.
}

// withEquipment returns a character's attributes with its current equipment under
// "equipment", for the state the map pushes. The attributes pass as they came (every
// key the game does not know, in its order) while the game does not know the
// character's equipment (its inventory not loaded yet) or while it is what they say
// already; only a change rewrites them.
func (g *Game) withEquipment(characterID string, attrs json.RawMessage) json.RawMessage {
	if !g.equip.known[characterID] {
		return attrs
	}
	obj := map[string]json.RawMessage{}
	if len(attrs) > 0 && json.Unmarshal(attrs, &obj) != nil {
		return attrs // not an object: left as it came
	}
	worn := map[string]string{}
	for _, e := range g.Inventory(characterID).Entries {
		if isEquipSlot(items.Slot(e.Compartment)) {
			worn[string(e.Compartment)] = e.ItemID
		}
	}
	var said map[string]string
	if raw, ok := obj[AttrEquipment]; ok && json.Unmarshal(raw, &said) == nil && maps.Equal(said, worn) && len(worn) > 0 {
		return attrs
	}
	if _, ok := obj[AttrEquipment]; !ok && len(worn) == 0 {
		return attrs
	}
	if len(worn) == 0 {
		delete(obj, AttrEquipment)
	} else {
		obj[AttrEquipment], _ = json.Marshal(worn)
	}
	if len(obj) == 0 {
		return nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return attrs
	}
	return b
}

// duplicate reports whether seq is among a character's latest equipment seqs, and
// remembers it if not.
func (s *equipState) duplicate(characterID string, seq uint64) bool {
	if s.seqs == nil {
		s.seqs = make(map[string][]uint64)
	}
	seen := s.seqs[characterID]
	if slices.Contains(seen, seq) {
		return true
	}
	if len(seen) == EquipSeqWindow {
		seen = append(seen[:0], seen[1:]...)
	}
	s.seqs[characterID] = append(seen, seq)
	return false
}

// lock locks a character's slot until tick until.
func (s *equipState) lock(characterID string, slot items.Slot, until uint64) {
	if s.unlock == nil {
		s.unlock = make(map[string]map[items.Slot]uint64)
	}
	if s.unlock[characterID] == nil {
		s.unlock[characterID] = make(map[items.Slot]uint64)
	}
	s.unlock[characterID][slot] = until
}

// mark records that the game knows a character's equipment.
func (s *equipState) mark(characterID string) {
	if s.known == nil {
		s.known = make(map[string]bool)
	}
	s.known[characterID] = true
}

// newSession forgets a character's seqs: a connection that took it over counts from 1.
func (s *equipState) newSession(characterID string) { delete(s.seqs, characterID) }

// forget drops everything kept about a character that left.
func (s *equipState) forget(characterID string) {
	delete(s.unlock, characterID)
	delete(s.seqs, characterID)
	delete(s.saved, characterID)
	delete(s.known, characterID)
}

// isEquipSlot reports whether s names an equipment slot.
func isEquipSlot(s items.Slot) bool {
	switch s {
	case items.SlotHead, items.SlotBody, items.SlotMainHand, items.SlotOffHand:
		return true
	}
	return false
}
