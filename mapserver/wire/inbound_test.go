package wire_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/mapyard/mapyard/mapserver/wire"
)

// w1Command is the envelope a W1 bot sends every tick.
var w1Command = []byte(`{"v":1,"kind":"command","seq":1203,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":1001,"dx":1,"dy":0},{"seq":1002,"dx":1,"dy":-1},{"seq":1003,"dx":0,"dy":-1}]},"tick":4711}`)

var inboundSeeds = []string{
	string(w1Command),
	`{"v":1,"kind":"ack","tick":9}`,
	`{"v":1,"kind":"ping","t":12.5}`,
	`{"v":1,"kind":"ping","t":161731}`,
	`{"kind":"ping","t":-0.5e+3}`,
	`{"t":"12"}`,
	`{"t":01}`,
	`{"t":1.}`,
	`{"t":-}`,
	`{"t":1e}`,
	`{"t":1,"t":2}`,
	`{"v":1,"kind":"hello","ticket":"abc"}`,
	` { "v" : 1 , "kind" : "command" , "payload" : [1, {"a":"b\"}"}] } `,
	`{}`,
	`{"v":1,"kind":"command","seq":1,"seq":2}`,
	`{"v":01}`,
	`{"v":-1}`,
	`{"v":1.5}`,
	`{"v":99999999999999999999}`,
	`{"seq":18446744073709551615}`,
	`{"seq":18446744073709551616}`,
	`{"kind":"comm\u0061nd"}`,
	`{"kind":"é"}`,
	`{"KIND":"command"}`,
	`{"payload":null}`,
	`{"payload":{"a":}}`,
	`{"payload":{]}`,
	`{"v":1,}`,
	`{"v":1} x`,
	`{"v":1}}`,
	`{"v":1true}`,
	`null`,
	``,
}

// checkInbound fails unless DecodeInbound and encoding/json agree on data.
func checkInbound(t *testing.T, data []byte) {
	t.Helper()
	var got, ref wire.Inbound
	gerr := wire.DecodeInbound(data, &got)
	rerr := json.Unmarshal(data, &ref)
	if (gerr == nil) != (rerr == nil) || gerr != nil && gerr.Error() != rerr.Error() {
		t.Fatalf("%q: error %v, encoding/json %v", data, gerr, rerr)
	}
	if gerr != nil {
		return
	}
	if !bytes.Equal(got.Payload, ref.Payload) || (got.Payload == nil) != (ref.Payload == nil) {
		t.Fatalf("%q: payload %q, encoding/json %q", data, got.Payload, ref.Payload)
	}
	got.Payload, ref.Payload = nil, nil
	if !reflect.DeepEqual(got, ref) {
		t.Fatalf("%q: decoded %+v, encoding/json %+v", data, got, ref)
	}
}

func TestDecodeInboundMatchesEncodingJSON(t *testing.T) {
	for _, s := range inboundSeeds {
		checkInbound(t, []byte(s))
	}
	var in wire.Inbound
	if err := wire.DecodeInbound(w1Command, &in); err != nil || in.Seq != 1203 || in.Tick != 4711 ||
		in.Feature != wire.FeatureMovement || in.Action != wire.ActionInputBatch {
		t.Fatalf("W1 command decoded as %+v, %v", in, err)
	}
}

// FuzzDecodeInbound: DecodeInbound accepts exactly what encoding/json accepts and
// decodes it the same way.
func FuzzDecodeInbound(f *testing.F) {
	for _, s := range inboundSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkInbound(t, data) })
}

// BenchmarkDecodeInbound measures the W1 command envelope through DecodeInbound.
func BenchmarkDecodeInbound(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		var in wire.Inbound
		if err := wire.DecodeInbound(w1Command, &in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeInboundJSON is the same envelope through encoding/json, for comparison.
func BenchmarkDecodeInboundJSON(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		var in wire.Inbound
		if err := json.Unmarshal(w1Command, &in); err != nil {
			b.Fatal(err)
		}
	}
}
