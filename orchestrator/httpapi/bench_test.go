package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mapyard/mapyard/orchestrator/control"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// benchIdentities is how many players call at once.
const benchIdentities = 200

// BenchmarkCharacters measures, on the orchestrator's public listener over its real
// SQLite file, GET /api/v1/characters and a join that enters the selected character,
// with benchIdentities identities (two characters each, the second selected) calling at
// once. It reports the 50th and 99th percentile latency of one call.
func BenchmarkCharacters(b *testing.B) {
	s, _ := MustOpenServer(b)
	api := testutil.CharacterAPI{Base: s.PublicURL()}
	keys := make([]string, benchIdentities)
	for i := range keys {
		keys[i] = testutil.NewAuthKey(b)
		api.Create(b, keys[i], "First")
		second := api.Create(b, keys[i], "Second")
		api.Do(b, http.MethodPost, control.PathCharacters+"/"+second.CharacterID+"/select", keys[i], nil, http.StatusOK, nil)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * benchIdentities}}
	for _, bc := range []struct {
		name string
		req  func(key string) *http.Request
	}{
		{"List", func(key string) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, s.PublicURL()+control.PathCharacters, nil)
			r.Header.Set("Authorization", "Bearer "+key)
			return r
		}},
		{"JoinSelected", func(key string) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, s.PublicURL()+control.PathJoin,
				bytes.NewReader([]byte(`{"authKey":"`+key+`"}`)))
			r.Header.Set("Content-Type", "application/json")
			return r
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var next atomic.Int64
			var mu sync.Mutex
			var all []time.Duration
			b.SetParallelism((benchIdentities + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				key := keys[int(next.Add(1)-1)%len(keys)]
				var local []time.Duration
				for pb.Next() {
					t0 := time.Now()
					resp, err := client.Do(bc.req(key))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
					local = append(local, time.Since(t0))
				}
				mu.Lock()
				all = append(all, local...)
				mu.Unlock()
			})
			b.StopTimer()
			if len(all) == 0 {
				return
			}
			slices.Sort(all)
			b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
