package items_test

import (
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/items"
)

// FuzzApply feeds arbitrary payloads of every kind to the decoder and the rules: they
// never panic, a refusal always carries an item_ code, and an allowed event leaves the
// state consistent (every touched item live with a place, or destroyed).
func FuzzApply(f *testing.F) {
	for _, s := range []string{
		`{"itemId":"torch-1","templateId":"torch","quantity":2,"from":{"instanceId":"i1","x":100,"y":200},"to":{"characterId":"alice"}}`,
		`{"itemId":"sword-1","templateId":"sword","quantity":1,"from":{"characterId":"alice"},"to":{"characterId":"bob"},"exchange":[{"itemId":"gold","templateId":"coin","quantity":30,"from":{"characterId":"bob"},"to":{"characterId":"alice"}}]}`,
		`{"itemId":"apples","templateId":"apple","quantity":5,"from":{"characterId":"alice"},"to":{}}`,
		`{"itemId":"ember","templateId":"ember","quantity":1,"from":{},"to":{"instanceId":"i1","x":1000,"y":1000},"trigger":"missing"}`,
		`{"itemId":"x","qty":1}`, `[]`, ``,
	} {
		for k := range items.Kinds() {
			f.Add(uint8(k), int64(400), []byte(s))
		}
	}
	cat := items.DefaultCatalog()
	f.Fuzz(func(t *testing.T, kind uint8, tick int64, payload []byte) {
		p, err := items.DecodePayload(payload)
		if err != nil {
			if items.CodeOf(err) != items.CodeMalformed {
				t.Fatalf("decode error %v without %s", err, items.CodeMalformed)
			}
			return
		}
		kinds := items.Kinds()
		ev := items.Event{ID: "e", Kind: kinds[int(kind)%len(kinds)], InstanceID: "i1", MapTick: tick, Payload: p}
		out, err := fixture().Apply(cat, ev)
		if err != nil {
			if items.CodeOf(err) == "" {
				t.Fatalf("refusal without a code: %v", err)
			}
			return
		}
		for _, it := range out.Items {
			if it.Live() && (it.Quantity < 1 || it.Place.Nowhere()) {
				t.Fatalf("allowed %+v left %+v", ev, it)
			}
		}
	})
}
