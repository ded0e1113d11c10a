package orchestrator_test

import (
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/orchestrator"
)

func TestCleanCharacterName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Ada", "Ada"},
		{"  Ada Lovelace ", "Ada Lovelace"},
		{"Zoë-2_o'Neil.", "Zoë-2_o'Neil."},
		{"7th", "7th"},
		{"東京", "東京"},
		{strings.Repeat("é", orchestrator.MaxCharacterNameLen), strings.Repeat("é", orchestrator.MaxCharacterNameLen)},
	} {
		if got, err := orchestrator.CleanCharacterName(tc.in); err != nil || got != tc.want {
			t.Errorf("CleanCharacterName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, reason string }{
		{"", "required"},
		{" \t ", "required"},
		{strings.Repeat("n", orchestrator.MaxCharacterNameLen+1), "longer than"},
		{"\xff\xfe", "UTF-8"},
		{"-dash", "start with"},
		{"a\x00b", "only letters"},
		{"<b>", "start with"},
		{"a<b>", "only letters"},
		{"a\u202eb", "only letters"}, // a right-to-left override
		{"a  b", "two spaces"},
	} {
		_, err := orchestrator.CleanCharacterName(tc.in)
		if apierr.Code(err) != apierr.EBADREQUEST || !strings.Contains(apierr.Message(err), tc.reason) {
			t.Errorf("CleanCharacterName(%q): %v, want bad_request saying %q", tc.in, err, tc.reason)
		}
	}
	if orchestrator.CharacterNameKey("ADA") != orchestrator.CharacterNameKey("ada") {
		t.Error("names differing in case have different keys")
	}
}
