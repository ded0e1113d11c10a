package edge_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/wire"
	"github.com/mapyard/mapyard/mapserver/ws"
	"github.com/mapyard/mapyard/orchestrator/edge"
)

// benchGame welcomes every hello and answers pings as the map does (decoding and
// encoding the JSON envelope), over the real map WebSocket transport.
type benchGame struct{ p mapserver.Peer }

func (benchGame) Hello(_ context.Context, _ []byte, _ bool, p mapserver.Peer) mapserver.Session {
	p.Send([]byte(`{"v":1,"kind":"welcome"}`), false)
	return benchGame{p}
}

func (g benchGame) Receive(data []byte, _ bool) {
	var in wire.Inbound
	if json.Unmarshal(data, &in) != nil {
		return
	}
	frame, _ := json.Marshal(wire.Pong{V: wire.Version, Kind: wire.KindPong, T: in.T})
	g.p.Send(frame, false)
}

func (benchGame) Closed() {}

// BenchmarkPingPong measures one ping/pong round trip of a single welcomed client
// (C=1) against the real map WebSocket server, directly on its game port and through
// the edge (with each copy engine), so the proxy hop's cost per message is the difference.
func BenchmarkPingPong(b *testing.B) {
	srv := ws.NewServer(benchGame{}, slog.New(slog.DiscardHandler))
	srv.Limits = ws.Limits{} // a benchmark client sends as fast as it can
	game := httptest.NewServer(srv)
	defer game.Close()
	routes := "bench-1=" + strconv.Itoa(portOf(b, game))
	e := MustOpenEdge(b, "", func(c *edge.Config) { c.StaticRoutes = routes })
	eg := MustOpenEdge(b, "", func(c *edge.Config) { c.StaticRoutes, c.Engine = routes, edge.EngineGoroutine })

	for _, tc := range []struct{ name, url string }{
		{"direct", "ws" + strings.TrimPrefix(game.URL, "http") + "/ws"},
		{"edge", wsURL(e, "bench-1")},
		{"edge-goroutine", wsURL(eg, "bench-1")},
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
