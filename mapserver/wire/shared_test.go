package wire_test

import (
	"bytes"
	"testing"

	"github.com/mapyard/mapyard/mapserver/wire"
)

// TestSharedRecordsMatchOneClient: an encoder serving many clients in one round, each
// with its own view (near and far), frame losses and acks (so that in one round the
// clients' baselines differ), writes every client exactly the bytes an encoder serving
// that client alone writes it. The encoder shares a slot's update record between the
// clients with the same baseline; this fails if one is ever sent a record made against
// another's baseline, or made before its slot changed.
func TestSharedRecordsMatchOneClient(t *testing.T) {
	const clients = 6
	for seed := range uint64(12) {
		w := newWorld(seed, 90)
		shared := farEncoder(3)
		alone := make([]*wire.Encoder, clients)
		var viaShared, viaAlone [clients]*wire.Client
		var pending [clients][]uint32
		for k := range clients {
			alone[k] = farEncoder(3)
			viaShared[k], viaAlone[k] = wire.NewClient(8), wire.NewClient(8)
		}
		var a, b []byte
		compared, deltas := 0, 0
		for tick := uint32(2); tick < 400; tick += 2 {
			w.advance()
			vis := w.encode(shared, tick)
			for _, enc := range alone {
				enc.Begin(tick)
				for i, e := range w.ents {
					enc.Set(int32(i), e)
				}
			}
			for k := range clients {
				// Client k sees about k/clients of its view from afar.
				var near, far []int32
				for _, s := range vis {
					if int(s)%clients < k {
						far = append(far, s)
					} else {
						near = append(near, s)
					}
				}
				var fa, fb bool
				a, fa = shared.EncodeFar(a[:0], viaShared[k], uint64(tick), int32(k), near, far)
				b, fb = alone[k].EncodeFar(b[:0], viaAlone[k], uint64(tick), int32(k), near, far)
				if fa != fb || !bytes.Equal(a, b) {
					t.Fatalf("seed %d tick %d client %d: shared encoder wrote %x (full %v), alone %x (full %v)", seed, tick, k, a, fa, b, fb)
				}
				compared++
				if !fa {
					deltas++
				}
				// Each client loses frames and acks late at its own pace (its newest
				// frame, or one before it, or none); both of its sides get the same acks.
				if w.r.IntN(10) < 1+k {
					continue
				}
				pending[k] = append(pending[k], tick)
				if n := len(pending[k]); n > 4 {
					pending[k] = pending[k][n-4:]
				}
				if i := len(pending[k]) - 1 - w.r.IntN(2+k%3); i >= 0 && w.r.IntN(5) > 0 {
					viaShared[k].Ack(pending[k][i])
					viaAlone[k].Ack(pending[k][i])
				}
			}
		}
		if deltas < compared/2 {
			t.Fatalf("seed %d: %d deltas of %d frames: the test did not exercise shared records", seed, deltas, compared)
		}
	}
}
