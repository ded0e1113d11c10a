package record

import "github.com/mapyard/mapyard/mapserver/kernel/mapgen"

// The id rules of mapyard, in one place. Two kinds of ids cross the map contract:
// names an operator or a map template chooses for maps and instances, which become
// container names, URL path segments and log fields; and opaque keys that maps and the
// orchestrator mint (characters, transfers, events, items, partitions, nonces), which
// are only stored and compared.

// IDRule says what map and instance ids look like. Ids become part of container names,
// log lines and URLs, so they are kept to a safe alphabet. The rule is the map
// generator's (mapgen.ValidID), so a config the map accepts names an instance the
// orchestrator accepts, and the other way round.
const IDRule = mapgen.IDRule

// MaxKeyLen bounds every opaque key, so a map cannot make the store keep arbitrarily
// long ones.
const MaxKeyLen = 200

// ValidName reports whether s is a valid map or instance id (IDRule).
func ValidName(s string) bool { return mapgen.ValidID(s) }

// ValidKey reports whether s is a valid opaque key: 1 to MaxKeyLen bytes of printable
// ASCII without spaces, so it is safe in logs, tokens and JSON as is.
func ValidKey(s string) bool {
	if len(s) == 0 || len(s) > MaxKeyLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
