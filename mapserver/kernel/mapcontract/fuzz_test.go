package mapcontract_test

import (
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// FuzzUnmarshal feeds arbitrary bodies to the strict decoder for every control RPC
// request type: it must never panic, and every failure must be a structured
// bad_request.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"instanceId":"a-1","token":"mt1.j.x"}`,
		`{"transferId":"t1","characterId":"c","fromInstanceId":"a-1","toMapId":"b","epoch":3,"state":{"x":1.5}}`,
		`{"instanceId":"a-1","partition":"character:c","revision":2,"envelope":{"schemaVersion":1,"payload":{}}}`,
		`{"eventId":"e","kind":"item_grant","payload":{"itemId":"i"}}`,
		`{"a":1}{"b":2}`, `[`, `null`, `{"revision":1e400}`, "\xff\xfe",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, v := range []any{
			&mapcontract.MapReady{}, &mapcontract.Heartbeat{}, &mapcontract.RedeemRequest{},
			&mapcontract.TransferRequest{}, &mapcontract.TransferResult{}, &mapcontract.PersistSnapshot{},
			&record.CriticalEvent{}, &public.JoinRequest{},
		} {
			err := httpkit.Unmarshal(body, v)
			if err != nil && apierr.Code(err) != apierr.EBADREQUEST {
				t.Fatalf("%T: unstructured error %v", v, err)
			}
		}
	})
}
