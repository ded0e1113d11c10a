package record_test

import (
	"encoding/json"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// TestCharacterStateRule: a pushed partition and a handed-over state are refused for
// the same faults, each with its own code; a handed-over state also needs its
// character and a revision.
func TestCharacterStateRule(t *testing.T) {
	good := record.CharacterState{CharacterID: "c1", MapID: "forest", InstanceID: "forest-1", X: 1, Y: 2,
		Attributes: json.RawMessage(`{"hp":3}`), Revision: 4}
	for _, tc := range []struct {
		name         string
		mut          func(*record.CharacterState)
		pushed, hand string // "" = accepted
	}{
		{"OK", func(*record.CharacterState) {}, "", ""},
		{"OKNoAttributes", func(s *record.CharacterState) { s.Attributes = nil }, "", ""},
		{"ErrNoMap", func(s *record.CharacterState) { s.MapID = "" }, apierr.EINVALIDENVELOPE, apierr.EBADREQUEST},
		{"ErrNoInstance", func(s *record.CharacterState) { s.InstanceID = "" }, apierr.EINVALIDENVELOPE, apierr.EBADREQUEST},
		{"ErrAttributesNotJSON", func(s *record.CharacterState) { s.Attributes = json.RawMessage(`{"hp":`) }, apierr.EINVALIDENVELOPE, apierr.EBADREQUEST},
		{"ErrNoCharacter", func(s *record.CharacterState) { s.CharacterID = "" }, "", apierr.EBADREQUEST},
		{"ErrNoRevision", func(s *record.CharacterState) { s.Revision = 0 }, "", apierr.EBADREQUEST},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.mut(&s)
			p := record.CharacterStatePayload{MapID: s.MapID, InstanceID: s.InstanceID, X: s.X, Y: s.Y, Attributes: s.Attributes}
			if got := apierr.Code(p.Validate()); got != tc.pushed {
				t.Errorf("pushed: code %q, want %q", got, tc.pushed)
			}
			if got := apierr.Code(s.Validate()); got != tc.hand {
				t.Errorf("handed over: code %q, want %q", got, tc.hand)
			}
		})
	}
	t.Run("Decode", func(t *testing.T) {
		p, err := record.DecodeCharacterStatePayload([]byte(`{"mapId":"m","instanceId":"m-1","x":5}`))
		if err != nil || p.X != 5 {
			t.Fatalf("decode = %+v, %v", p, err)
		}
		for _, raw := range []string{`{"mapId":"m"}`, `[1]`, `{`} {
			if _, err := record.DecodeCharacterStatePayload([]byte(raw)); apierr.Code(err) != apierr.EINVALIDENVELOPE {
				t.Errorf("decode %s: %v, want %s", raw, err, apierr.EINVALIDENVELOPE)
			}
		}
	})
}
