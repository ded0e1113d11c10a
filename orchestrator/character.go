package orchestrator

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// Character is a persistent character, owned by the identity whose keyed authKey hash
// it carries. The raw authKey is never stored. An identity may own several characters
// (up to a host's cap) and has one of them selected: the one a join without a
// characterId enters.
type Character struct {
	ID        string    `json:"characterId"`
	KeyHash   string    `json:"-"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"-"`
	// MapID is the map the character was last saved in ("" if it never played).
	MapID string `json:"mapId"`
	// Selected is true for the identity's selected character.
	Selected bool `json:"selected"`
}

// CharacterSummary is one character as its owner sees it: an entry of
// GET /api/v1/characters and the answer to creating one.
type CharacterSummary struct {
	CharacterID string `json:"characterId"`
	Name        string `json:"name"`
	MapID       string `json:"mapId"`
	Selected    bool   `json:"selected"`
	CreatedAtMs int64  `json:"createdAtMs"`
}

// Summary returns c as its owner sees it.
func (c *Character) Summary() CharacterSummary {
	return CharacterSummary{CharacterID: c.ID, Name: c.Name, MapID: c.MapID, Selected: c.Selected, CreatedAtMs: c.CreatedAt.UnixMilli()}
}

// Character name rules. Names are shown to other players, so they are short, printable
// and free of look-alike tricks such as leading spaces or control characters.
const (
	// MaxCharacterNameLen is the longest name, in characters (not bytes).
	MaxCharacterNameLen = 24
	// DefaultCharacterName names the character a join creates for a new identity that
	// gave no name.
	DefaultCharacterName = "wanderer"
	// DefaultMaxCharactersPerKey is how many characters one identity may own
	// (ORCH_MAX_CHARACTERS_PER_KEY's default).
	DefaultMaxCharactersPerKey = 8
)

// CleanCharacterName returns name without surrounding spaces if it is a valid character
// name, else apierr.EBADREQUEST with a message that says what is wrong with it: empty,
// longer than MaxCharacterNameLen characters, not starting with a letter or digit, a
// character other than letters, digits, spaces and - _ ' ., or two spaces in a row.
func CleanCharacterName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", apierr.Errorf(apierr.EBADREQUEST, "name is required")
	case !utf8.ValidString(name):
		return "", apierr.Errorf(apierr.EBADREQUEST, "name must be UTF-8 text")
	case utf8.RuneCountInString(name) > MaxCharacterNameLen:
		return "", apierr.Errorf(apierr.EBADREQUEST, "name is longer than %d characters", MaxCharacterNameLen)
	}
	first, _ := utf8.DecodeRuneInString(name)
	if !unicode.IsLetter(first) && !unicode.IsDigit(first) {
		return "", apierr.Errorf(apierr.EBADREQUEST, "name must start with a letter or a digit")
	}
	prev := first
	for _, r := range name {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_', r == '\'', r == '.':
		case r == ' ':
			if prev == ' ' {
				return "", apierr.Errorf(apierr.EBADREQUEST, "name must not hold two spaces in a row")
			}
		default:
			return "", apierr.Errorf(apierr.EBADREQUEST, "name may hold only letters, digits, spaces and - _ ' . (not %q)", r)
		}
		prev = r
	}
	return name, nil
}

// CharacterNameKey is the form in which two names of one identity are compared: names
// that differ only in case are the same name.
func CharacterNameKey(name string) string { return strings.ToLower(name) }

// CharacterSave is one row of a character's save audit trail: a checkpoint or a
// transfer boundary that changed its saved state, with the schema version, simulation
// build and hash the saved state carries. A store keeps a recent window of them per
// character (ORCH_SAVE_AUDIT_KEEP).
type CharacterSave struct {
	SaveID int64 `json:"saveId"`
	AtMs   int64 `json:"atMs"`
	// Source is "checkpoint" (Ref: the checkpoint id) or "transfer_boundary" (Ref: the
	// critical event id).
	Source         string `json:"source"`
	Ref            string `json:"ref"`
	MapID          string `json:"mapId"`
	InstanceID     string `json:"instanceId"`
	Revision       int64  `json:"revision"`
	SchemaVersion  int    `json:"schemaVersion"`
	SimCoreVersion string `json:"simCoreVersion"`
	StateHash      string `json:"stateHash"`
}
