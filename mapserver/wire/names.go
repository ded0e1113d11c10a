package wire

import (
	"bytes"
	"encoding/json"
)

// Players' names. Snapshots show a player as an entity id, which says nothing to the
// people playing; names are text that rarely changes, so they stay out of the binary
// frames (whose field mask an older decoder refuses to see grow) and are asked for
// instead: a client sends the entity ids it has no name for,
// {"v":1,"kind":"command","seq":N,"feature":"players","action":"names","payload":{"ids":[12,40]}},
// and the map answers with a "names" event (Names) naming those of them that are
// players on this map. Asking costs only the clients that want names, and only for the
// entities they see.
const (
	FeaturePlayers = "players"
	ActionNames    = "names"
	// EventNames is the name of the event that answers a names query.
	EventNames = "names"
	// MaxNamesPerQuery bounds the ids of one query.
	MaxNamesPerQuery = 64
)

// NamesQuery is a decoded players/names command: the entity ids to name.
type NamesQuery struct {
	IDs []uint64 `json:"ids"`
}

// PlayerName names the player shown as entity ID: its character and the name players
// see it by.
type PlayerName struct {
	ID          uint64 `json:"id"`
	CharacterID string `json:"characterId"`
	Name        string `json:"name"`
}

// Names is the Data of a "names" event: the answer to the names query of command Seq,
// listing the asked ids that are players here, in the order asked (an id left out is
// no player of this map: an NPC, an item, or one who left). A player who asks again
// for an id gets the same answer; names do not change while a character is on a map.
type Names struct {
	Seq   uint64       `json:"seq"`
	Names []PlayerName `json:"names"`
}

// DecodeNamesQuery decodes a names query's payload strictly: one object whose only
// member "ids" lists 1 to MaxNamesPerQuery entity ids. Anything else is bad_payload.
func DecodeNamesQuery(payload []byte) (NamesQuery, error) {
	var q NamesQuery
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil || dec.More() || len(q.IDs) == 0 || len(q.IDs) > MaxNamesPerQuery {
		return NamesQuery{}, errorf(CodeBadPayload, `names needs {"ids":[...]} with 1 to %d entity ids`, MaxNamesPerQuery)
	}
	return q, nil
}
