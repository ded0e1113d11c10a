package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

func TestDecodeInputBatch(t *testing.T) {
	many := `{"inputs":[` + strings.Repeat(`{"seq":1,"dx":0,"dy":0},`, wire.MaxInputsPerBatch) + `{"seq":1,"dx":0,"dy":0}]}`
	tests := []struct {
		name, payload, code string
	}{
		{"Valid", `{"inputs":[{"seq":5,"dx":1,"dy":-1},{"seq":6,"dx":0,"dy":127}]}`, ""},
		{"NotJSON", `nope`, wire.CodeBadPayload},
		{"Trailing", `{"inputs":[{"seq":5,"dx":1,"dy":-1}]}x`, wire.CodeBadPayload},
		{"UnknownField", `{"inputs":[{"seq":5,"up":true}]}`, wire.CodeBadPayload},
		{"Missing", `{}`, wire.CodeBadPayload},
		{"Empty", `{"inputs":[]}`, wire.CodeBadPayload},
		{"Fraction", `{"inputs":[{"seq":5,"dx":0.5,"dy":0}]}`, wire.CodeBadPayload},
		{"TooMany", many, wire.CodeTooManyInputs},
		{"ZeroSeq", `{"inputs":[{"seq":0,"dx":1,"dy":0}]}`, wire.CodeBadSeq},
		{"Decreasing", `{"inputs":[{"seq":5,"dx":1,"dy":0},{"seq":5,"dx":1,"dy":0}]}`, wire.CodeBadSeq},
		{"Direction", `{"inputs":[{"seq":5,"dx":-128,"dy":0}]}`, wire.CodeBadDirection},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := wire.DecodeInputBatch([]byte(tt.payload), nil)
			if tt.code == "" {
				want := []sim.Input{{Seq: 5, DX: 1, DY: -1}, {Seq: 6, DX: 0, DY: 127}}
				if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
					t.Fatalf("got %v, %v; want %v", got, err, want)
				}
				return
			}
			var we *wire.Error
			if !errors.As(err, &we) || we.Code != tt.code {
				t.Fatalf("err %v, want code %s", err, tt.code)
			}
		})
	}
}
