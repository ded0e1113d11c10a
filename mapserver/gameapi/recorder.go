package gameapi

import (
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// Recorder is an Out that keeps what it is given: the kit's buffer between a call of
// the game and acting on it, and a test's view of what a game did. The kit acts on a
// call's notes first, in order, then its portals, critical events and saves.
type Recorder struct {
	Notes     []Note
	Portals   []Entered
	Criticals []record.CriticalEvent
	Saves     []string
}

var _ Out = (*Recorder)(nil)

// Note is a frame for the characters it names (Out.Notify).
type Note struct {
	Frame        []byte
	CharacterIDs []string
}

// Entered is a character that entered a portal (Out.Portal).
type Entered struct {
	CharacterID string
	Portal      mapgen.Portal
}

// Notify keeps a note.
func (r *Recorder) Notify(frame []byte, characterIDs []string) {
	r.Notes = append(r.Notes, Note{Frame: frame, CharacterIDs: characterIDs})
}

// Portal keeps a character that entered a portal.
func (r *Recorder) Portal(characterID string, p mapgen.Portal) {
	r.Portals = append(r.Portals, Entered{CharacterID: characterID, Portal: p})
}

// Critical keeps a critical event.
func (r *Recorder) Critical(ev record.CriticalEvent) { r.Criticals = append(r.Criticals, ev) }

// Save keeps a character whose state is to be pushed now.
func (r *Recorder) Save(characterID string) { r.Saves = append(r.Saves, characterID) }

// Empty reports whether nothing was recorded since the last Reset.
func (r *Recorder) Empty() bool {
	return len(r.Notes) == 0 && len(r.Portals) == 0 && len(r.Criticals) == 0 && len(r.Saves) == 0
}

// Reset forgets everything recorded, keeping the room for the next call (the kit
// records every tick).
func (r *Recorder) Reset() {
	clear(r.Notes)
	clear(r.Criticals)
	r.Notes, r.Portals, r.Criticals, r.Saves = r.Notes[:0], r.Portals[:0], r.Criticals[:0], r.Saves[:0]
}
