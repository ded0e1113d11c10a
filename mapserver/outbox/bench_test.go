package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/latency"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/outbox"
	"github.com/mapyard/mapyard/orchestrator/fake/faketest"
)

// BenchmarkCriticalRoundTrip measures what a map waits for between a player's pickup
// and showing it: the map's outbox (outbox) sending the critical event to a real
// orchestrator (the fake one: real control listener, lease check, item rules deciding
// inside the SQLite store's transaction, group commit with fsync) and the durable ack
// coming back to the map, which answers the player at its next tick. Pickups by eight
// players are offered open-loop at a fixed rate (latency from an event's scheduled
// time to its ack, so any queueing counts), through the outbox as it sends them:
//   - one-by-one: one POST /orch/persist-critical-event per event (MaxBatch 1);
//   - batched: the events queued while a request is in flight go in one POST
//     /orch/persist-critical-events (the default).
func BenchmarkCriticalRoundTrip(b *testing.B) {
	for _, mode := range []struct {
		name     string
		maxBatch int
	}{{"one-by-one", 1}, {"batched", 0}} {
		for _, rate := range []int{100, 1000} {
			b.Run(fmt.Sprintf("%s/rate=%d", mode.name, rate), func(b *testing.B) { benchRoundTrip(b, rate, mode.maxBatch) })
		}
	}
}

func benchRoundTrip(b *testing.B, rate, maxBatch int) {
	ctx := context.Background()
	o := faketest.MustOpenOrch(b)
	inst := faketest.DefaultInstance
	cred, _ := faketest.Credentials(b, inst)
	cl := mapcontract.NewClient(o.HTTP.ControlURL(), cred)
	cl.HTTP = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	// The map's control listener, as far as registration needs it: start-instance is
	// answered, and nothing else is asked.
	ctl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{}`)) }))
	defer ctl.Close()
	port, _ := strconv.Atoi(ctl.URL[strings.LastIndexByte(ctl.URL, ':')+1:])
	l := outbox.New(cl, mapcontract.MapReady{InstanceID: inst, MapID: "default", GamePort: port, ControlPort: port, Version: "bench"},
		time.Second, slog.New(slog.DiscardHandler))
	l.MaxBatch, l.QueueSize = maxBatch, max(b.N, outbox.DefaultQueueSize)
	if err := l.Open(); err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	faketest.WaitFor(b, "the map to register", func() bool { return o.Maps.Registered(inst) })

	const players = 8
	keys := []string{"Zq3v9LrT0pXw2YbN5cHs8KdA", "Wm4k8PqR2sTv6XyZ0aBc3DeF", "Gh5j7KlM9nOp1QrS3tUv5WxY", "Ab2c4De6Fg8Hi0Jk2Lm4No6P",
		"Qr8s0Tu2Vw4Xy6Za8Bc0De2F", "Gh4i6Jk8Lm0No2Pq4Rs6Tu8V", "Wx0y2Za4Bc6De8Fg0Hi2Jk4L", "Mn6o8Pq0Rs2Tu4Vw6Xy8Za0B"}
	chars := make([]*mapcontract.RedeemResult, players)
	for i := range chars {
		j := o.Join(b, `{"authKey":"`+keys[i]+`"}`)
		r, err := cl.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: inst, Token: j.Ticket})
		if err != nil {
			b.Fatal(err)
		}
		chars[i] = r
	}
	ground := items.Place{InstanceID: inst, X: 1000, Y: 1000}
	for lo := 0; lo < b.N; lo += mapcontract.MaxSeedItems {
		var seed []items.Item
		for i := lo; i < min(b.N, lo+mapcontract.MaxSeedItems); i++ {
			seed = append(seed, items.Item{ID: fmt.Sprintf("it-%d", i), TemplateID: "coin", Quantity: 1, Place: ground, State: items.StateActive})
		}
		if _, err := cl.InstanceItems(ctx, mapcontract.InstanceItemsRequest{InstanceID: inst, Seed: seed}); err != nil {
			b.Fatal(err)
		}
	}
	events := make([]record.CriticalEvent, b.N)
	for i := range events {
		c := chars[i%players]
		p := items.Payload{Move: items.Move{ItemID: fmt.Sprintf("it-%d", i), TemplateID: "coin", Quantity: 1, From: ground, To: items.Place{CharacterID: c.CharacterID}}}
		events[i] = record.CriticalEvent{EventID: fmt.Sprintf("ev-%d", i), InstanceID: inst, Kind: string(items.KindPickup),
			MapTick: int64(i), Payload: p.Encode(), Epochs: map[string]int64{c.CharacterID: c.Epoch}}
	}
	before := o.DB.Stats()

	lat := latency.NewRecorder(b.N)
	var wg sync.WaitGroup
	wg.Add(b.N)
	b.ResetTimer()
	ol := latency.NewOpenLoop(rate)
	for i := range events {
		at := ol.Wait(i)
		err := l.Critical(events[i], func(_ record.CriticalAck, err error) {
			if err != nil {
				b.Error(err)
			}
			lat.Add(time.Since(at))
			wg.Done()
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(ol.PerSecond(b.N), "events/s")
	lat.Report(b)
	if st := o.DB.Stats(); st.CriticalCommits > before.CriticalCommits {
		b.ReportMetric(float64(st.CriticalEvents-before.CriticalEvents)/float64(st.CriticalCommits-before.CriticalCommits), "events/commit")
	}
}
