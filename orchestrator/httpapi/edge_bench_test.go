package httpapi_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/mapgen"
	"github.com/mapyard/mapyard/mapserver/ws"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/control"
)

// benchRedeemer admits every ticket, so each benchmark connection gets a welcome.
type benchRedeemer struct{}

func (benchRedeemer) Redeem(_ context.Context, r control.RedeemRequest) (*control.RedeemResult, error) {
	return &control.RedeemResult{Kind: "join", CharacterID: "bench-" + r.Token, Epoch: 1}, nil
}

func (benchRedeemer) TransferResult(context.Context, control.TransferResult) error { return nil }

// BenchmarkPingPong measures one ping/pong round trip of a single welcomed client
// (C=1) against the real map WebSocket server, directly on its game port and through
// the orchestrator's edge proxy, so the proxy's cost per message is the difference.
func BenchmarkPingPong(b *testing.B) {
	cfg, err := mapgen.Resolve("bench-1", mapgen.DefaultMapID, nil)
	if err != nil {
		b.Fatal(err)
	}
	world := ws.NewWorld()
	world.Set(cfg, "bench-hash")
	game := httptest.NewServer(ws.NewServer(benchRedeemer{}, world, 30, 15, slog.New(slog.DiscardHandler)))
	defer game.Close()
	edge := MustOpenEdge(b, edgeMaps{inst: map[string]orchestrator.Instance{
		"bench-1": {ID: "bench-1", State: orchestrator.StateReady, GamePort: portOf(b, game)},
	}})

	for _, tc := range []struct{ name, url string }{
		{"direct", "ws" + strings.TrimPrefix(game.URL, "http") + "/ws"},
		{"proxy", "ws" + strings.TrimPrefix(edge.PublicURL(), "http") + orchestrator.WSPath("bench-1")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c, _, err := websocket.DefaultDialer.Dial(tc.url, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if err := c.WriteMessage(websocket.TextMessage, []byte(`{"v":1,"kind":"hello","ticket":"t"}`)); err != nil {
				b.Fatal(err)
			}
			if _, _, err := c.ReadMessage(); err != nil {
				b.Fatal(err)
			}
			ping := []byte(`{"v":1,"kind":"ping","t":1}`)
			b.ReportAllocs()
			start := time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := c.WriteMessage(websocket.TextMessage, ping); err != nil {
					b.Fatal(err)
				}
				if _, _, err := c.ReadMessage(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "µs/op")
		})
	}
}
