package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/latency"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// BenchmarkCriticalItemRoute measures the critical item event round trip a map waits
// for before it shows a pickup to its player: the control route (map credential, strict
// decoding), the domain's lease check, the item rules deciding inside the store's
// transaction, group commit with fsync (synchronous=FULL), and the durable ack back.
// Events are offered open-loop at a fixed rate, so latency includes any queueing:
//   - single: one POST /orch/persist-critical-event per event, each in its own goroutine
//     (latency from its scheduled send to its ack);
//   - batch30hz: the events of each 1/30 s go in one POST /orch/persist-critical-events,
//     as a map sends them once per tick (latency from the batch's send to its answer).
//
// batch30hz/rate=6000 is the sustained figure (target 5,000/s): events/s is the rate
// achieved until the last ack, which falls to what the path sustains once it cannot
// keep up. It is offered above the target so that a path that keeps up reads above it
// too (at exactly the target, the last batch's round trip alone reads as a shortfall).
// One event per request is not offered at that rate: it cannot keep up at 1,000.
// cpu-µs/event is the process's CPU (user + system: client and server, both in it) per
// event: the work the path costs, which other load on the machine moves less than it
// moves the latencies.
func BenchmarkCriticalItemRoute(b *testing.B) {
	for _, mode := range []struct {
		name    string
		batchHz int
		rates   []int
	}{{"single", 0, []int{100, 1000}}, {"batch30hz", 30, []int{100, 1000, 6000}}} {
		for _, rate := range mode.rates {
			b.Run(fmt.Sprintf("%s/rate=%d", mode.name, rate), func(b *testing.B) { benchItemRoute(b, rate, mode.batchHz) })
		}
	}
}

func benchItemRoute(b *testing.B, rate, batchHz int) {
	s, db := MustOpenServer(b)
	ctx := context.Background()
	const players = 8
	keys := []string{"Zq3v9LrT0pXw2YbN5cHs8KdA", "Wm4k8PqR2sTv6XyZ0aBc3DeF", "Gh5j7KlM9nOp1QrS3tUv5WxY", "Ab2c4De6Fg8Hi0Jk2Lm4No6P",
		"Qr8s0Tu2Vw4Xy6Za8Bc0De2F", "Gh4i6Jk8Lm0No2Pq4Rs6Tu8V", "Wx0y2Za4Bc6De8Fg0Hi2Jk4L", "Mn6o8Pq0Rs2Tu4Vw6Xy8Za0B"}
	chars := make([]mapcontract.RedeemResult, players)
	for i := range chars {
		chars[i] = joined(b, s, keys[i])
	}
	cl := mapcontract.NewClient(s.ControlURL(), as(b, "default-1"))
	cl.HTTP = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 0}}
	for lo := 0; lo < b.N; lo += mapcontract.MaxSeedItems {
		var seed []items.Item
		for i := lo; i < min(b.N, lo+mapcontract.MaxSeedItems); i++ {
			seed = append(seed, seedItem(fmt.Sprintf("it-%d", i), "coin", 1))
		}
		// Through the service rather than the route: the route answers every item of the
		// instance, more than a client reads once tens of thousands are seeded.
		if _, err := s.Critical.InstanceItems(ctx, mapcontract.InstanceItemsRequest{InstanceID: "default-1", Seed: seed}); err != nil {
			b.Fatal(err)
		}
	}
	events := make([]record.CriticalEvent, b.N)
	for i := range events {
		c := chars[i%players]
		events[i] = itemEvent(fmt.Sprintf("ev-%d", i), items.KindPickup, items.Payload{Move: items.Move{
			ItemID: fmt.Sprintf("it-%d", i), TemplateID: "coin", Quantity: 1, From: groundAt, To: items.Place{CharacterID: c.CharacterID}}},
			map[string]int64{c.CharacterID: c.Epoch})
	}
	lat := latency.NewRecorder(b.N)
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := processCPU()
	ol := latency.NewOpenLoop(rate)
	if batchHz > 0 {
		sendBatches(b, cl, events, lat, ol, time.Second/time.Duration(batchHz), &wg)
	}
	for i := 0; batchHz == 0 && i < len(events); i++ {
		at := ol.Wait(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cl.PersistCritical(ctx, events[i]); err != nil {
				b.Error(err)
			}
			lat.Add(time.Since(at))
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(ol.PerSecond(b.N), "events/s")
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/event")
	lat.Report(b)
	if st := db.Stats(); st.CriticalCommits > 0 {
		b.ReportMetric(float64(st.CriticalEvents)/float64(st.CriticalCommits), "events/commit")
	}
}

// sendBatches sends, every tick, the events due by then in one batch, each batch in its
// own goroutine, and records every event's latency as its batch's round trip.
func sendBatches(b *testing.B, cl *mapcontract.Client, events []record.CriticalEvent, lat *latency.Recorder,
	ol latency.OpenLoop, tick time.Duration, wg *sync.WaitGroup) {
	next := 0
	for t := ol.Start.Add(tick); next < len(events); t = t.Add(tick) {
		if d := time.Until(t); d > 0 {
			time.Sleep(d)
		}
		due := min(len(events), ol.Due())
		for next < due {
			lo, hi := next, min(due, next+mapcontract.MaxCriticalBatch)
			next = hi
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				a, err := cl.PersistCriticalBatch(context.Background(), mapcontract.CriticalBatch{InstanceID: "default-1", Events: events[lo:hi]})
				if err != nil {
					b.Error(err)
					return
				}
				for _, r := range a.Results {
					if r.Error != nil {
						b.Error(r.Error)
					}
					lat.Add(time.Since(t0))
				}
			}()
		}
	}
}

// processCPU is the CPU (user + system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
