package edge_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
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

// dialWelcomed connects to url, says hello and reads the welcome; the connection is
// closed when the test ends.
func dialWelcomed(tb testing.TB, url string) *websocket.Conn {
	tb.Helper()
	c, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"v":1,"kind":"hello","ticket":"t"}`)); err != nil {
		tb.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, got, err := c.ReadMessage(); err != nil || !strings.Contains(string(got), "welcome") {
		tb.Fatalf("welcome: %q, %v", got, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	return c
}

// gameListener serves srv as a map's game listener does: its WebSocket at /ws and
// the edge's link at edgelink.Path.
func gameListener(tb testing.TB, srv *ws.Server) *httptest.Server {
	mux := http.NewServeMux()
	mux.Handle("/ws", srv)
	mux.HandleFunc(edgelink.Path, srv.ServeLink)
	ts := httptest.NewServer(mux)
	tb.Cleanup(ts.Close)
	return ts
}

// BenchmarkPingPong measures one ping/pong round trip of a single welcomed client
// (C=1) against the real map WebSocket server, directly on its game port and through
// the edge (over a link to the map, over a connection of the client's own with each
// copy engine), so the proxy hop's cost per message is the difference.
func BenchmarkPingPong(b *testing.B) {
	srv := ws.NewServer(benchGame{}, slog.New(slog.DiscardHandler))
	srv.Limits = ws.Limits{} // a benchmark client sends as fast as it can
	game := gameListener(b, srv)
	routes := "bench-1=" + strconv.Itoa(portOf(b, game))
	el := MustOpenEdge(b, "", func(c *edge.Config) { c.StaticRoutes = routes })
	e := MustOpenEdge(b, "", func(c *edge.Config) { c.StaticRoutes, c.MapLink = routes, "off" })
	eg := MustOpenEdge(b, "", func(c *edge.Config) { c.StaticRoutes, c.Engine = routes, edge.EngineGoroutine })

	for _, tc := range []struct{ name, url string }{
		{"direct", "ws" + strings.TrimPrefix(game.URL, "http") + "/ws"},
		{"edge-link", wsURL(el, "bench-1")},
		{"edge", wsURL(e, "bench-1")},
		{"edge-goroutine", wsURL(eg, "bench-1")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := dialWelcomed(b, tc.url)
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

// echoAll is a minimal WebSocket echo backend: every message is written back as it
// was read, with no report first.
func echoAll(tb testing.TB) *httptest.Server {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			mt, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(mt, data); err != nil {
				return
			}
		}
	}))
	tb.Cleanup(ts.Close)
	return ts
}

// BenchmarkThroughput is workload W2's pipelined test in one process: 10 connections,
// each keeping 32 messages of 100 bytes in flight, echoed by a minimal backend,
// directly and through the edge. One op is one echoed message; cpu-µs/msg is this
// process's CPU (clients, backend and edge together) per message, so the edge's cost
// per message is the difference between the two.
//
// The edge-tls cases have the clients speak TLS to the edge (a certificate from files),
// copied by the epoll engine with the session in its loop, and by the goroutine
// engine: the clients' own TLS costs the same in both, so their difference is the
// engines'.
func BenchmarkThroughput(b *testing.B) {
	const conns, window = 10, 32
	backend := echoAll(b)
	routes := "bench-1=" + strconv.Itoa(portOf(b, backend))
	e := MustOpenEdge(b, "", func(c *edge.Config) { c.StaticRoutes = routes })
	ca := newTestCA(b)
	et := openHTTPSEdge(b, ca, "", func(c *edge.Config) { c.StaticRoutes, c.WSRatePerMin = routes, 0 })
	etg := openHTTPSEdge(b, ca, "", func(c *edge.Config) { c.StaticRoutes, c.WSRatePerMin, c.Engine = routes, 0, edge.EngineGoroutine })
	for _, tc := range []struct {
		name, url string
		d         *websocket.Dialer
	}{
		{"direct", "ws" + strings.TrimPrefix(backend.URL, "http") + "/ws", websocket.DefaultDialer},
		{"edge", wsURL(e, "bench-1"), websocket.DefaultDialer},
		{"edge-tls", wsURL(et.Edge, "bench-1"), ca.dialer()},
		{"edge-tls-goroutine", wsURL(etg.Edge, "bench-1"), ca.dialer()},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cs := make([]*websocket.Conn, conns)
			for i := range cs {
				c, _, err := tc.d.Dial(tc.url, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				cs[i] = c
			}
			msg := make([]byte, 100)
			cpu0, start := processCPU(), time.Now()
			b.ResetTimer()
			var wg sync.WaitGroup
			errs := make(chan error, 2*conns)
			for i, c := range cs {
				n := b.N / conns
				if i < b.N%conns {
					n++
				}
				slots := make(chan struct{}, window)
				wg.Add(2)
				go func() { // writer: at most window messages in flight
					defer wg.Done()
					for range n {
						slots <- struct{}{}
						if err := c.WriteMessage(websocket.BinaryMessage, msg); err != nil {
							errs <- err
							return
						}
					}
				}()
				go func() { // reader: every echo frees a slot
					defer wg.Done()
					for range n {
						if _, _, err := c.ReadMessage(); err != nil {
							errs <- err
							return
						}
						<-slots
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			select {
			case err := <-errs:
				b.Fatal(err)
			default:
			}
			sec := time.Since(start).Seconds()
			b.ReportMetric(float64(b.N)/sec, "msg/s")
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/msg")
		})
	}
}

// roundGame welcomes every client and counts their inputs, for BenchmarkRound.
type roundGame struct {
	mu    sync.Mutex
	peers []mapserver.Peer
	in    chan struct{}
}

func (g *roundGame) Hello(_ context.Context, _ []byte, _ bool, p mapserver.Peer) mapserver.Session {
	g.mu.Lock()
	g.peers = append(g.peers, p)
	g.mu.Unlock()
	p.Send([]byte(`{"v":1,"kind":"welcome"}`), false)
	return g
}

func (g *roundGame) Receive([]byte, bool) { g.in <- struct{}{} }
func (g *roundGame) Closed()              {}

// BenchmarkRound is a map's traffic in one process: 200 welcomed clients each send one
// input and then read one 200-byte snapshot, which the server sends to every client
// once it has every input, writes held while it queues them as the tick does. One op
// is one client's round; cpu-µs/op is this process's CPU (clients, map transport and
// edge) per client and round, directly on the map's port, through the edge over a
// link (paced, and with EDGE_LINK_BATCH_MS=0), and through the edge with a connection
// per client: the edge's cost per client-round is the difference to direct.
func BenchmarkRound(b *testing.B) {
	const clients = 200
	g := &roundGame{in: make(chan struct{}, clients)}
	srv := ws.NewServer(g, slog.New(slog.DiscardHandler))
	srv.Limits = ws.Limits{}
	game := gameListener(b, srv)
	routes := "bench-1=" + strconv.Itoa(portOf(b, game))
	el := MustOpenEdge(b, "", func(c *edge.Config) { c.StaticRoutes, c.MaxConns = routes, 1000 })
	eu := MustOpenEdge(b, "", func(c *edge.Config) { c.StaticRoutes, c.MaxConns, c.LinkBatchMS = routes, 1000, 0 })
	e := MustOpenEdge(b, "", func(c *edge.Config) { c.StaticRoutes, c.MaxConns, c.MapLink = routes, 1000, "off" })
	snapshot := make([]byte, 200)
	input := []byte(`{"v":1,"kind":"input","seq":1}`)
	for _, tc := range []struct{ name, url string }{
		{"direct", "ws" + strings.TrimPrefix(game.URL, "http") + "/ws"},
		{"edge-link", wsURL(el, "bench-1")},
		{"edge-link-unpaced", wsURL(eu, "bench-1")},
		{"edge", wsURL(e, "bench-1")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			g.mu.Lock()
			g.peers = nil
			g.mu.Unlock()
			cs := make([]*websocket.Conn, clients)
			for i := range cs {
				cs[i] = dialWelcomed(b, tc.url)
			}
			rounds := max(1, b.N/clients)
			errs := make(chan error, clients)
			var wg sync.WaitGroup
			cpu0 := processCPU()
			b.ResetTimer()
			for _, c := range cs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						if err := c.WriteMessage(websocket.TextMessage, input); err != nil {
							errs <- err
							return
						}
						if _, _, err := c.ReadMessage(); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			g.mu.Lock()
			peers := g.peers
			g.mu.Unlock()
			for range rounds {
				for range clients {
					<-g.in
				}
				srv.HoldWrites()
				for _, p := range peers {
					p.Send(snapshot, true)
				}
				srv.ReleaseWrites()
			}
			wg.Wait()
			b.StopTimer()
			select {
			case err := <-errs:
				b.Fatal(err)
			default:
			}
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(rounds*clients), "cpu-µs/op")
		})
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
