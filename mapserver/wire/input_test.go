package wire_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

func TestDecodeInputBatch(t *testing.T) {
	var many strings.Builder
	many.WriteString(`{"inputs":[`)
	for i := range wire.MaxInputsPerBatch + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `{"seq":%d,"dx":0,"dy":0}`, i+1)
	}
	many.WriteString("]}")
	tests := []struct {
		name, payload, code string
	}{
		{"Valid", `{"inputs":[{"seq":5,"dx":1,"dy":-1},{"seq":6,"dx":0,"dy":127}]}`, ""},
		{"ValidSpacedReordered", " {\"inputs\" :\n[ {\"dy\":-1, \"seq\":5,\"dx\":1} ,{\"dx\":0,\"dy\":127,\"seq\":6}] }\t", ""},
		{"MissingField", `{"inputs":[{"seq":5,"dx":1}]}`, wire.CodeBadPayload},
		{"RepeatedField", `{"inputs":[{"seq":5,"dx":1,"dx":1}]}`, wire.CodeBadPayload},
		{"Escape", `{"inputs":[{"s\u0065q":5,"dx":1,"dy":0}]}`, wire.CodeBadPayload},
		{"Exponent", `{"inputs":[{"seq":5e1,"dx":1,"dy":0}]}`, wire.CodeBadPayload},
		{"LeadingZero", `{"inputs":[{"seq":05,"dx":1,"dy":0}]}`, wire.CodeBadPayload},
		{"StringSeq", `{"inputs":[{"seq":"5","dx":1,"dy":0}]}`, wire.CodeBadPayload},
		{"NegativeSeq", `{"inputs":[{"seq":-5,"dx":1,"dy":0}]}`, wire.CodeBadSeq},
		{"HugeSeq", `{"inputs":[{"seq":18446744073709551616,"dx":1,"dy":0}]}`, wire.CodeBadSeq},
		{"Unclosed", `{"inputs":[{"seq":5,"dx":1,"dy":0}`, wire.CodeBadPayload},
		{"NotJSON", `nope`, wire.CodeBadPayload},
		{"Trailing", `{"inputs":[{"seq":5,"dx":1,"dy":-1}]}x`, wire.CodeBadPayload},
		{"UnknownField", `{"inputs":[{"seq":5,"up":true}]}`, wire.CodeBadPayload},
		{"Missing", `{}`, wire.CodeBadPayload},
		{"Empty", `{"inputs":[]}`, wire.CodeBadPayload},
		{"Fraction", `{"inputs":[{"seq":5,"dx":0.5,"dy":0}]}`, wire.CodeBadPayload},
		{"TooMany", many.String(), wire.CodeTooManyInputs},
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

// BenchmarkDecodeInputBatch measures one W1 batch: a bot sends its input of the tick
// and resends the two before it.
func BenchmarkDecodeInputBatch(b *testing.B) {
	payload := []byte(`{"inputs":[{"seq":1001,"dx":1,"dy":0},{"seq":1002,"dx":1,"dy":-1},{"seq":1003,"dx":0,"dy":-1}]}`)
	dst := make([]sim.Input, 0, wire.MaxInputsPerBatch)
	b.ReportAllocs()
	for range b.N {
		var err error
		if dst, err = wire.DecodeInputBatch(payload, dst[:0]); err != nil {
			b.Fatal(err)
		}
	}
}
