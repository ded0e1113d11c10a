package tickloop_test

import (
	"fmt"
	"testing"
)

// TestInputBatches_AckCarried plays the two ways clients send movement
// (docs/netcode.md, Commands and acks): one input_batch per snapshot received, its
// inputs those gathered since the last, carrying that snapshot's tick as the ack (no
// ack message); and, as clients did before, one command per input. Either walks every
// input, and the next snapshot is a delta against the tick the command carried.
func TestInputBatches_AckCarried(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch int // inputs per command
	}{
		{"OnePerSnapshot", 2},
		{"OnePerSnapshotAfterJitter", 3},
		{"OnePerInput", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
			c.welcome()
			s := c.snapshotWhere("full", func(s fakeSnapshot) bool { return s.Full })
			cmd, seq, x := uint64(0), uint64(0), s.X
			for range 6 {
				var inputs string
				for i := range tc.batch {
					seq++
					if i > 0 {
						inputs += ","
					}
					inputs += fmt.Sprintf(`{"seq":%d,"dx":1}`, seq)
				}
				cmd++
				c.send(fmt.Sprintf(`{"v":1,"kind":"command","seq":%d,"tick":%d,"feature":"movement","action":"input_batch","payload":{"inputs":[%s]}}`,
					cmd, s.Tick, inputs))
				acked := s.Tick
				want := seq
				s = c.snapshotWhere(fmt.Sprintf("input %d walked", want), func(s fakeSnapshot) bool { return s.Ack == want })
				x += float64(tc.batch)
				if s.Full || s.Base != acked || s.X != x {
					t.Fatalf("after command %d carrying tick %d: snapshot %+v, want a delta against it at x %v", cmd, acked, s, x)
				}
			}
		})
	}
}
