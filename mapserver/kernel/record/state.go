package record

import (
	"encoding/json"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// A character's state reaches the orchestrator two ways: pushed by the map that holds
// the character, in its "character:<id>" snapshot partition (CharacterStatePayload),
// or handed over by a transfer as its final state in the map it leaves
// (CharacterState, which becomes a transfer_boundary). Both say where the character
// stands, so both follow one rule, placeProblem: a map and an instance, and attributes
// that are JSON. A store that keeps one and a join that reads it back never meet a
// state the other way would have refused.

// placeProblem says what breaks the rule of every character state, or "" when nothing
// does.
func placeProblem(mapID, instanceID string, attributes json.RawMessage) string {
	switch {
	case mapID == "" || instanceID == "":
		return "needs mapId and instanceId"
	case len(attributes) > 0 && !json.Valid(attributes):
		return "needs attributes that are JSON"
	}
	return ""
}

// Validate checks a pushed character partition's payload against the rule of every
// character state. Error code: EINVALIDENVELOPE, as for the rest of a snapshot's
// envelope.
func (p *CharacterStatePayload) Validate() error {
	if why := placeProblem(p.MapID, p.InstanceID, p.Attributes); why != "" {
		return apierr.Errorf(apierr.EINVALIDENVELOPE, "character partition payload %s", why)
	}
	return nil
}

// DecodeCharacterStatePayload decodes the payload of a character partition and
// validates it. Error code: EINVALIDENVELOPE.
func DecodeCharacterStatePayload(payload []byte) (*CharacterStatePayload, error) {
	var p CharacterStatePayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, apierr.Errorf(apierr.EINVALIDENVELOPE, "character partition payload: %v", err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Validate checks a character state handed over by a transfer: the rule of every
// character state, a character id that is a key (ValidKey), and a positive revision,
// which orders the state against the pushes of the character's maps. Error code:
// EBADREQUEST: it is part of a map's request, not of an envelope.
func (s *CharacterState) Validate() error {
	switch {
	case !ValidKey(s.CharacterID):
		return apierr.Errorf(apierr.EBADREQUEST, "character state needs a characterId of 1 to %d printable characters", MaxKeyLen)
	case s.Revision <= 0:
		return apierr.Errorf(apierr.EBADREQUEST, "character state needs a positive revision")
	}
	if why := placeProblem(s.MapID, s.InstanceID, s.Attributes); why != "" {
		return apierr.Errorf(apierr.EBADREQUEST, "character state %s", why)
	}
	return nil
}
