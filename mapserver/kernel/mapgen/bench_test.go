package mapgen_test

import (
	"encoding/json"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
)

// BenchmarkGenerateDefault measures generating the default 2 km x 2 km map; it reports
// the size of the world JSON and of the canonical encoding.
func BenchmarkGenerateDefault(b *testing.B) {
	c := mapgen.Default()
	w := mustGenerate(b, c)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := mapgen.Generate(c); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(len(mustJSON(b, w))), "json-bytes")
	b.ReportMetric(float64(len(canonical(b, w))), "canonical-bytes")
	b.ReportMetric(float64(len(w.Props)), "props")
}

// BenchmarkHash measures hashing the default world.
func BenchmarkHash(b *testing.B) {
	w := mustGenerate(b, mapgen.Default())
	b.ReportAllocs()
	for b.Loop() {
		_ = w.Hash()
	}
}

// BenchmarkMarshalJSON measures encoding the default world as JSON, what the wasm
// entry hands to JavaScript.
func BenchmarkMarshalJSON(b *testing.B) {
	w := mustGenerate(b, mapgen.Default())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(w); err != nil {
			b.Fatal(err)
		}
	}
}
