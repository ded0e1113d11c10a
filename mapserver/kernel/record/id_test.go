package record_test

import (
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

func TestIDRules(t *testing.T) {
	for _, tt := range []struct {
		id        string
		name, key bool
	}{
		{"frontier-1", true, true},
		{"forest-", false, true},
		{"-forest", false, true},
		{"character:guest-AbC_9", false, true},
		{"i1/chest-1", false, true},
		{"Forest-1", false, true},
		{"", false, false},
		{"a b", false, false},
		{"naïve", false, false},
		{strings.Repeat("a", record.MaxKeyLen), false, true},
		{strings.Repeat("a", record.MaxKeyLen+1), false, false},
	} {
		if got := record.ValidName(tt.id); got != tt.name {
			t.Errorf("ValidName(%q) = %v, want %v", tt.id, got, tt.name)
		}
		if got := record.ValidKey(tt.id); got != tt.key {
			t.Errorf("ValidKey(%q) = %v, want %v", tt.id, got, tt.key)
		}
	}
}

// TestIDRuleIsTheGenerators: the record rules and the map generator accept exactly
// the same instance ids.
func TestIDRuleIsTheGenerators(t *testing.T) {
	for _, id := range []string{"forest-1", "forest-", "-a", "a", "wild-3-7", "Ab", strings.Repeat("a", 48), strings.Repeat("a", 49), "a_b"} {
		if got, want := record.ValidName(id), mapgen.ValidateID("instanceId", id) == nil; got != want {
			t.Errorf("%q: record says %v, mapgen says %v", id, got, want)
		}
	}
}
