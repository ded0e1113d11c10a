package record_test

import (
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// TestCharacterPartition: a character's partition reads back as that character, and
// no other partition name does, so the map that names it and the orchestrator that
// reads it agree.
func TestCharacterPartition(t *testing.T) {
	p := record.CharacterPartition("c-42")
	if got, want := p, "character:c-42"; got != want {
		t.Fatalf("CharacterPartition = %q, want %q", got, want)
	}
	if id, ok := record.CharacterOfPartition(p); !ok || id != "c-42" {
		t.Fatalf("CharacterOfPartition(%q) = %q, %v", p, id, ok)
	}
	for _, tc := range []struct {
		partition      string
		character, val bool
	}{
		{"character:c-42", true, true},
		{"world", false, true},
		{"characters", false, true},
		{"character:", false, false}, // names no character
		{"", false, false},
		{"character:a b", true, false}, // not a key
	} {
		if _, ok := record.CharacterOfPartition(tc.partition); ok != tc.character {
			t.Errorf("CharacterOfPartition(%q) ok = %v, want %v", tc.partition, ok, tc.character)
		}
		if got := record.ValidPartition(tc.partition); got != tc.val {
			t.Errorf("ValidPartition(%q) = %v, want %v", tc.partition, got, tc.val)
		}
	}
}
