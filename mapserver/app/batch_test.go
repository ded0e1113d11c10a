package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/sim"
)

// TestProtocol_BatchedAndOldClientsPlay walks a player for two seconds at the tick
// rate with the Go client as it sends today (one input_batch per snapshot, the ack
// carried) and as clients sent before (a command per input, SendEachInput), on one
// map: both end exactly where the shared movement code puts their inputs, so the map
// takes either and prediction stays exact. It logs the messages a second each sent.
func TestProtocol_BatchedAndOldClientsPlay(t *testing.T) {
	f := mustOpenFakeOrch(t)
	m := mustOpenMap(t, f, nil)
	cols := sim.NewColliders(m.World())
	for _, tc := range []struct {
		name string
		opt  client.Options
	}{
		{"Batched", client.Options{}},
		{"OneMessagePerInput", client.Options{SendEachInput: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := f.join(t, `{}`)
			c, err := client.Dial(context.Background(), m.GameURL()+"/ws", client.Hello{Ticket: j.Ticket}, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			waitFor(t, "the first snapshot", func() bool { _, ok := c.State().SelfEntity(); return ok })
			first, _ := c.State().SelfEntity()
			start := sim.Vec{X: first.X, Y: first.Y}

			// A square walk, ten inputs a side, at the tick rate, with a ping a second as
			// the bots send.
			dirs := [][2]int8{{127, 0}, {0, 127}, {-127, 0}, {0, -127}}
			var inputs []sim.Input
			tick := time.NewTicker(time.Second / 30)
			defer tick.Stop()
			c.ResetStats()
			began := time.Now()
			for i := range 60 {
				<-tick.C
				d := dirs[i/10%len(dirs)]
				seq, err := c.Move(int(d[0]), int(d[1]))
				if err != nil {
					t.Fatal(err)
				}
				inputs = append(inputs, sim.Input{Seq: seq, DX: d[0], DY: d[1]})
				if i%30 == 0 {
					_ = c.Ping()
				}
			}
			took := time.Since(began)
			sent := c.Stats()
			last := inputs[len(inputs)-1].Seq
			waitFor(t, "the last input walked", func() bool { return c.State().Seq == last })

			want, _ := sim.Replay(cols, start, sim.Stride{}, inputs, sim.DefaultPlayerSpeed, m.Config.TickHz)
			self, _ := c.State().SelfEntity()
			if got := (sim.Vec{X: self.X, Y: self.Y}); got != want {
				t.Fatalf("after %d inputs from %v: at %v, want %v", len(inputs), start, got, want)
			}
			rate := float64(sent.MessagesUp) / took.Seconds()
			t.Logf("%s: %d inputs in %s: %d messages up (%.1f a second, %.0f bytes a second), %d snapshots received",
				tc.name, len(inputs), took.Round(time.Millisecond), sent.MessagesUp, rate, float64(sent.BytesUp)/took.Seconds(), sent.Snapshots)
			if tc.opt.SendEachInput {
				if sent.MessagesUp < int64(len(inputs)) {
					t.Fatalf("%d messages for %d inputs sent one by one", sent.MessagesUp, len(inputs))
				}
			} else if sent.MessagesUp >= int64(len(inputs)) {
				t.Fatalf("%d messages for %d inputs: the client sent no batches", sent.MessagesUp, len(inputs))
			}
		})
	}
	for _, line := range strings.Split(metrics(t, m), "\n") {
		if strings.HasPrefix(line, "mapyard_map_inputs_dropped_total ") && line != "mapyard_map_inputs_dropped_total 0" {
			t.Fatalf("the map dropped inputs: %s", line)
		}
	}
}
