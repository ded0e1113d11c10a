package record_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

func TestSnapshotEnvelope_JSON(t *testing.T) {
	env := record.NewSnapshotEnvelope("sim-1", 7, 1700000000000, json.RawMessage(`{"hp":3}`))
	buf, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"schemaVersion":1`, `"simCoreVersion":"sim-1"`, `"payloadHash":"`, `"mapTick":7`, `"serverTimeMs":1700000000000`, `"payload":{"hp":3}`} {
		if !strings.Contains(string(buf), field) {
			t.Errorf("%s lacks %s", buf, field)
		}
	}
	var back record.SnapshotEnvelope
	if err := json.Unmarshal(buf, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Validate(0); err != nil {
		t.Fatalf("round-tripped envelope invalid: %v", err)
	}
}

func TestSnapshotEnvelope_Validate(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		env := record.NewSnapshotEnvelope("sim-1", 0, 0, json.RawMessage(`{}`))
		if err := env.Validate(0); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ErrHashMismatch", func(t *testing.T) {
		env := record.NewSnapshotEnvelope("sim-1", 0, 0, json.RawMessage(`{"a":1}`))
		env.Payload = json.RawMessage(`{"a":2}`)
		if got, want := apierr.Code(env.Validate(0)), apierr.EHASHMISMATCH; got != want {
			t.Fatalf("code=%q, want %q", got, want)
		}
	})
	t.Run("ErrTooLarge", func(t *testing.T) {
		env := record.NewSnapshotEnvelope("sim-1", 0, 0, json.RawMessage(`{"a":"0123456789"}`))
		if got, want := apierr.Code(env.Validate(8)), apierr.ETOOLARGE; got != want {
			t.Fatalf("code=%q, want %q", got, want)
		}
	})
}
