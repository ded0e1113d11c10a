package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/latency"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// BenchmarkTransferHandoff measures the server side of a transfer to a warm destination:
// from the source map's POST /orch/request-transfer (the character's state saved, the
// source's lease released, the token minted) to the destination's POST /orch/redeem of
// the token (the lease moved, the state handed over), through the control listener with
// the maps' own credentials, over the real SQLite store (synchronous=FULL). The
// destination reports the spawn (POST /orch/transfer-result) after the measured span,
// as a map does. Transfers are offered open-loop at 100 a second, by 200 characters
// going back and forth between two ready instances, so latency includes any queueing.
// One op is one transfer; p50-ms and p99-ms are the figures.
func BenchmarkTransferHandoff(b *testing.B) {
	const (
		rate       = 100
		characters = 200
	)
	s, _ := MustOpenServer(b)
	ctx := context.Background()
	httpc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	clients := map[string]*mapcontract.Client{}
	for _, id := range []string{"default-1", "frontier-1"} {
		clients[id] = mapcontract.NewClient(s.ControlURL(), as(b, id))
		clients[id].HTTP = httpc
	}
	type player struct {
		mu       sync.Mutex // one transfer at a time
		id       string
		at       string // instance holding the lease
		epoch    int64
		revision int64
	}
	players := make([]*player, characters)
	for i := range players {
		r := joined(b, s, fmt.Sprintf("HandoffKey%014d", i))
		players[i] = &player{id: r.CharacterID, at: "default-1", epoch: r.Epoch}
	}
	other := map[string]string{"default-1": "frontier", "frontier-1": "default"}

	lat := latency.NewRecorder(b.N)
	var wg sync.WaitGroup
	b.ResetTimer()
	ol := latency.NewOpenLoop(rate)
	for i := 0; i < b.N; i++ {
		at := ol.Wait(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := players[i%characters]
			p.mu.Lock()
			defer p.mu.Unlock()
			p.revision++
			a, err := clients[p.at].RequestTransfer(ctx, mapcontract.TransferRequest{
				TransferID: fmt.Sprintf("tr-%d", i), CharacterID: p.id, FromInstanceID: p.at, ToMapID: other[p.at], Epoch: p.epoch,
				State: record.CharacterState{MapID: strings.TrimSuffix(p.at, "-1"), X: float64(i % 500), Y: 7,
					Attributes: json.RawMessage(`{"gold":12}`), Revision: p.revision},
			})
			if err != nil {
				b.Errorf("request transfer %d: %v", i, err)
				return
			}
			r, err := clients[a.ToInstanceID].Redeem(ctx, mapcontract.RedeemRequest{InstanceID: a.ToInstanceID, Token: a.Token})
			if err != nil {
				b.Errorf("redeem transfer %d: %v", i, err)
				return
			}
			lat.Add(time.Since(at))
			p.at, p.epoch = a.ToInstanceID, r.Epoch
			if err := clients[p.at].TransferResult(ctx, mapcontract.TransferResult{TransferID: a.TransferID, InstanceID: p.at, Success: true}); err != nil {
				b.Errorf("transfer result %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(ol.PerSecond(b.N), "transfers/s")
	lat.Report(b)
}
