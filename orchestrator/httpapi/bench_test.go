package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/latency"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// benchIdentities is how many players call at once; benchPace is how often each calls
// in the paced runs (200 identities: 400 calls a second).
const (
	benchIdentities = 200
	benchPace       = 500 * time.Millisecond
)

// timeCall sends r and returns how long the whole answer took; any status but 200 is
// an error.
func timeCall(client *http.Client, r *http.Request) (time.Duration, error) {
	t0 := time.Now()
	resp, err := client.Do(r)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	return time.Since(t0), nil
}

// BenchmarkCharacters measures, on the orchestrator's public listener over its real
// SQLite file, GET /api/v1/characters and a join that enters the selected character,
// with benchIdentities identities (two characters each, the second selected) calling at
// once: back to back (the host saturated: by Little's law each call then waits for the
// ~200 ahead of it, so the percentiles measure throughput) and paced. It reports the
// 50th and 99th percentile latency of one call.
func BenchmarkCharacters(b *testing.B) {
	s, _ := MustOpenServer(b)
	api := testutil.CharacterAPI{Base: s.PublicURL()}
	keys := make([]string, benchIdentities)
	for i := range keys {
		keys[i] = testutil.NewAuthKey(b)
		api.Create(b, keys[i], "First")
		second := api.Create(b, keys[i], "Second")
		api.Do(b, http.MethodPost, public.PathCharacters+"/"+second.CharacterID+"/select", keys[i], nil, http.StatusOK, nil)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * benchIdentities}}
	for _, bc := range []struct {
		name string
		req  func(key string) *http.Request
	}{
		{"List", func(key string) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, s.PublicURL()+public.PathCharacters, nil)
			r.Header.Set("Authorization", "Bearer "+key)
			return r
		}},
		{"JoinSelected", func(key string) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, s.PublicURL()+public.PathJoin,
				bytes.NewReader([]byte(`{"authKey":"`+key+`"}`)))
			r.Header.Set("Content-Type", "application/json")
			return r
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var next atomic.Int64
			var lat latency.Recorder
			b.SetParallelism((benchIdentities + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				key := keys[int(next.Add(1)-1)%len(keys)]
				var local []time.Duration
				for pb.Next() {
					d, err := timeCall(client, bc.req(key))
					if err != nil {
						b.Error(err)
						return
					}
					local = append(local, d)
				}
				lat.AddAll(local)
			})
			b.StopTimer()
			lat.Report(b)
		})
		// Paced: each identity calls once every benchPace, as players loading pages do,
		// instead of back to back: the latency a player sees when the host is not
		// saturated. b.N calls are spread over the identities.
		b.Run(bc.name+"Paced", func(b *testing.B) {
			var lat latency.Recorder
			var wg sync.WaitGroup
			per := (b.N + benchIdentities - 1) / benchIdentities
			b.ResetTimer()
			for i, key := range keys {
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(time.Duration(i) * benchPace / benchIdentities) // spread the first calls
					t := time.NewTicker(benchPace)
					defer t.Stop()
					var local []time.Duration
					for n := 0; n < per; n++ {
						d, err := timeCall(client, bc.req(key))
						if err != nil {
							b.Error(err)
							return
						}
						local = append(local, d)
						<-t.C
					}
					lat.AddAll(local)
				}()
			}
			wg.Wait()
			b.StopTimer()
			lat.Report(b)
		})
	}
}
