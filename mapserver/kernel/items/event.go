package items

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

// Kind is the kind of a critical item event: the Kind of the critical event that
// carries it to the orchestrator.
type Kind string

// Critical item event kinds. Every change of an item's owner or place is one of them.
const (
	// KindPickup moves an item from the ground of the sender's instance to a character.
	KindPickup Kind = "item_pickup"
	// KindDrop moves an item from a character to the ground of the sender's instance.
	KindDrop Kind = "item_drop"
	// KindTrade moves an item from one character to another, and the Exchange items back,
	// all or nothing.
	KindTrade Kind = "item_trade"
	// KindConsume uses up Quantity units of a consumable item a character holds.
	KindConsume Kind = "item_consume"
	// KindRecover is the recovery pass moving or respawning a critical item at one of
	// its policy's anchors; it writes an append-only audit row.
	KindRecover Kind = "item_recover"
)

// Kinds lists every item event kind.
func Kinds() []Kind { return []Kind{KindPickup, KindDrop, KindTrade, KindConsume, KindRecover} }

// IsKind reports whether k is an item event kind (a critical event the item rules decide).
func IsKind(k string) bool { return slices.Contains(Kinds(), Kind(k)) }

// Place is where an item is: held by a character (CharacterID), lying in the world
// (InstanceID and a position in centimetres, like the map generator's), or nowhere (the
// zero Place: not yet spawned, or consumed). Never both a character and an instance.
type Place struct {
	CharacterID string `json:"characterId,omitempty"`
	InstanceID  string `json:"instanceId,omitempty"`
	X           int32  `json:"x,omitempty"`
	Y           int32  `json:"y,omitempty"`
}

// Held reports whether a character holds the item.
func (p Place) Held() bool { return p.CharacterID != "" && p.InstanceID == "" }

// InWorld reports whether the item lies in a map instance.
func (p Place) InWorld() bool { return p.InstanceID != "" && p.CharacterID == "" }

// Nowhere reports whether the place is the zero Place.
func (p Place) Nowhere() bool { return p == Place{} }

// valid reports whether p is exactly one of held, in the world, or nowhere, with ids
// that are valid and a position only in the world.
func (p Place) valid() bool {
	switch {
	case p.Nowhere():
		return true
	case p.Held():
		return ValidID(p.CharacterID) && p.X == 0 && p.Y == 0
	case p.InWorld():
		return ValidID(p.InstanceID)
	}
	return false
}

// String describes a place for messages and audit rows: "character:<id>",
// "world:<instance>@<x>,<y>" or "nowhere".
func (p Place) String() string {
	switch {
	case p.Held():
		return "character:" + p.CharacterID
	case p.InWorld():
		return fmt.Sprintf("world:%s@%d,%d", p.InstanceID, p.X, p.Y)
	case p.Nowhere():
		return "nowhere"
	}
	return fmt.Sprintf("invalid(%q,%q)", p.CharacterID, p.InstanceID)
}

// Move is one item changing place: the whole item for a pickup, drop, trade or
// recovery, Quantity units of it for a consumption. TemplateID and Quantity state what
// the sender believes the item is; the rules refuse the move if the item disagrees.
type Move struct {
	ItemID     string `json:"itemId"`
	TemplateID string `json:"templateId"`
	Quantity   int64  `json:"quantity"`
	From       Place  `json:"from"`
	To         Place  `json:"to"`
}

// Recovery triggers: why the recovery pass moved or respawned an item.
const (
	// TriggerMissing: the canonical item does not exist (never spawned, or consumed or
	// destroyed and its cooldown has passed).
	TriggerMissing = "missing"
	// TriggerInvalidPlace: the item lies where no player can reach it.
	TriggerInvalidPlace = "invalid_place"
	// TriggerOwnershipTimeout: an inactive character held it past the policy's timeout.
	TriggerOwnershipTimeout = "ownership_timeout"
	// TriggerQuota: a copy of an instance_quota item is topped up at its anchor.
	TriggerQuota = "quota"
)

// Payload is the JSON payload of a critical item event: one Move, plus the counterpart's
// items for a trade and the trigger of a recovery. Keys are strict: an unknown field is
// refused, so a misspelt field is an error rather than a silent zero.
type Payload struct {
	Move
	// Exchange are the items the receiving character gives back in a trade, each from
	// Move.To to Move.From; empty for a gift.
	Exchange []Move `json:"exchange,omitempty"`
	// Trigger says why a recovery happened (Trigger* constants); recoveries only.
	Trigger string `json:"trigger,omitempty"`
}

// Event is a critical item event as the rules see it: the critical event's envelope
// (id, kind, sending instance, map tick) and its decoded payload.
type Event struct {
	ID         string
	Kind       Kind
	InstanceID string
	MapTick    int64
	Payload
}

// MaxExchange bounds the items one trade may carry back.
const MaxExchange = 16

// DecodePayload strictly decodes a critical item event's payload (one JSON object, no
// unknown fields, nothing after it). Its error is a CodeMalformed refusal that says
// what was wrong.
func DecodePayload(b []byte) (Payload, error) {
	var p Payload
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Payload{}, refusef(CodeMalformed, "item event payload: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Payload{}, refusef(CodeMalformed, "item event payload: trailing data after the object")
	}
	return p, nil
}

// Encode returns the payload as the compact JSON a critical event carries.
func (p Payload) Encode() []byte {
	b, err := json.Marshal(p)
	if err != nil {
		panic("items: encode payload: " + err.Error()) // only strings and integers: cannot fail
	}
	return b
}

// Moves returns every move of the event: the main one, then the exchange.
func (ev Event) Moves() []Move { return append([]Move{ev.Move}, ev.Exchange...) }

// Characters returns the characters whose authority the sender must hold for the event,
// sorted and without repeats: every character an item leaves or reaches, except the
// holder a recovery takes an item from (that character is inactive by definition; the
// orchestrator checks instead that no other map holds it, see RecoveredFrom).
func (ev Event) Characters() []string {
	var ids []string
	add := func(id string) {
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, m := range ev.Moves() {
		if ev.Kind != KindRecover {
			add(m.From.CharacterID)
		}
		add(m.To.CharacterID)
	}
	slices.Sort(ids)
	return ids
}

// RecoveredFrom returns the character a recovery takes an item from, or "".
func (ev Event) RecoveredFrom() string {
	if ev.Kind == KindRecover {
		return ev.From.CharacterID
	}
	return ""
}

// Validate checks the event's shape, without looking at any state: a known kind, valid
// ids, a positive quantity, places that fit the kind (a pickup goes from the sender's
// world to a character, a drop the other way, a trade between two characters, a
// consumption from a character to nowhere, a recovery to the sender's world), and a
// trigger on recoveries only. It returns a CodeMalformed or CodeIllegalMove refusal.
func (ev Event) Validate() error {
	if !IsKind(string(ev.Kind)) {
		return refusef(CodeMalformed, "unknown item event kind %q", ev.Kind)
	}
	if ev.MapTick < 0 {
		return refusef(CodeMalformed, "mapTick must not be negative")
	}
	if len(ev.Exchange) > 0 && ev.Kind != KindTrade {
		return refusef(CodeMalformed, "%s carries no exchange", ev.Kind)
	} else if len(ev.Exchange) > MaxExchange {
		return refusef(CodeMalformed, "a trade carries at most %d exchanged items", MaxExchange)
	}
	if (ev.Trigger != "") != (ev.Kind == KindRecover) {
		return refusef(CodeMalformed, "a trigger is required on %s and only there", KindRecover)
	}
	var seen []string
	for i, m := range ev.Moves() {
		if !ValidID(m.ItemID) || !ValidID(m.TemplateID) {
			return refusef(CodeMalformed, "move %d needs a valid itemId and templateId", i)
		} else if m.Quantity < 1 {
			return refusef(CodeMalformed, "move %d needs a positive quantity", i)
		} else if !m.From.valid() || !m.To.valid() {
			return refusef(CodeMalformed, "move %d: from and to must each be a character, a world position or nowhere", i)
		} else if slices.Contains(seen, m.ItemID) {
			return refusef(CodeMalformed, "item %q moves twice in one event", m.ItemID)
		}
		seen = append(seen, m.ItemID)
	}
	m, inst := ev.Move, ev.InstanceID
	illegal := func(want string) error {
		return refusef(CodeIllegalMove, "%s moves an item %s, not from %s to %s", ev.Kind, want, m.From, m.To)
	}
	switch ev.Kind {
	case KindPickup:
		if !m.From.InWorld() || m.From.InstanceID != inst || !m.To.Held() {
			return illegal("from the ground of the sending instance to a character")
		}
	case KindDrop:
		if !m.From.Held() || !m.To.InWorld() || m.To.InstanceID != inst {
			return illegal("from a character to the ground of the sending instance")
		}
	case KindTrade:
		if !m.From.Held() || !m.To.Held() || m.From == m.To {
			return illegal("between two characters")
		}
		for _, x := range ev.Exchange {
			if x.From != m.To || x.To != m.From {
				return refusef(CodeIllegalMove, "exchanged item %q must go from %s to %s", x.ItemID, m.To, m.From)
			}
		}
	case KindConsume:
		if !m.From.Held() || !m.To.Nowhere() {
			return illegal("from a character to nowhere")
		}
	case KindRecover:
		if !m.To.InWorld() || m.To.InstanceID != inst || m.From == m.To {
			return illegal("to a world place of the sending instance")
		}
		switch ev.Trigger {
		case TriggerMissing, TriggerQuota:
			if !m.From.Nowhere() {
				return refusef(CodeIllegalMove, "a %s recovery respawns an item from nowhere", ev.Trigger)
			}
		case TriggerInvalidPlace:
			if !m.From.InWorld() {
				return refusef(CodeIllegalMove, "an %s recovery moves an item lying in the world", ev.Trigger)
			}
		case TriggerOwnershipTimeout:
			if !m.From.Held() {
				return refusef(CodeIllegalMove, "an %s recovery takes an item from a character", ev.Trigger)
			}
		default:
			return refusef(CodeMalformed, "unknown recovery trigger %q", ev.Trigger)
		}
	}
	return nil
}
