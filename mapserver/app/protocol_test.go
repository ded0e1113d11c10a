package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/app"
	"github.com/mapyard/mapyard/mapserver/kernel/mapenv"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// gamer is a real WebSocket player that decodes its snapshots with the wire decoder,
// as the Go client and the browser do.
type gamer struct {
	*player
	dec  *wire.Decoder
	last *wire.Snapshot
}

// joinMap joins through the fake orchestrator and says hello to the map.
func joinMap(t *testing.T, f *fakeOrch, m *app.Main) (*gamer, map[string]any) {
	t.Helper()
	j := f.join(t, `{}`)
	g := &gamer{player: dialMap(t, m), dec: wire.NewDecoder(0)}
	g.send(`{"v":1,"kind":"hello","ticket":"` + j.Ticket + `"}`)
	w := g.next()
	if w["kind"] != "welcome" {
		t.Fatalf("got %v, want welcome", w)
	}
	return g, w
}

// snapshotWhere reads frames until a decoded snapshot satisfies ok; inventory events in
// between are kept for nextInventory, any other JSON message fails the test.
func (g *gamer) snapshotWhere(what string, ok func(*wire.Snapshot) bool) *wire.Snapshot {
	g.t.Helper()
	_ = g.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		typ, data, err := g.c.ReadMessage()
		if err != nil {
			g.t.Fatalf("waiting for a snapshot with %s: %v", what, err)
		}
		if typ != websocket.BinaryMessage {
			var m map[string]any
			if json.Unmarshal(data, &m) == nil && m["kind"] == "event" && m["name"] == "inventory" {
				g.inventories = append(g.inventories, m["data"].(map[string]any))
				continue
			}
			g.t.Fatalf("waiting for a snapshot with %s: got %s", what, data)
		}
		s, err := g.dec.Decode(data)
		if err != nil {
			g.t.Fatalf("decode snapshot: %v", err)
		}
		g.last = s
		if ok(s) {
			return s
		}
	}
}

func self(s *wire.Snapshot) *wire.Entity { return s.Find(s.Self) }

// TestProtocol_MoveAckDelta walks a player with input batches and checks the
// snapshots: full first, its position exactly where the shared movement code puts it,
// the input seq acknowledged, deltas once a snapshot is acknowledged.
func TestProtocol_MoveAckDelta(t *testing.T) {
	f := mustOpenFakeOrch(t)
	m := mustOpenMap(t, f, nil)
	g, w := joinMap(t, f, m)
	// The welcome announces the far rule the page interpolates distant entities by.
	if fv, _ := w["farView"].(map[string]any); fv["radius"] != 60.0 || fv["every"] != float64(wire.DefaultFarEvery) {
		t.Fatalf("welcome farView %v, want radius 60 every %d", w["farView"], wire.DefaultFarEvery)
	}

	first := g.snapshotWhere("anything", func(*wire.Snapshot) bool { return true })
	if !first.Full || first.Seq != 0 || self(first) == nil || self(first).Kind != uint8(sim.KindPlayer) {
		t.Fatalf("first snapshot %+v", first)
	}
	start := sim.Vec{X: self(first).X, Y: self(first).Y}

	// 8 ticks east (within the jitter buffer), acknowledging the first snapshot on the command itself.
	var inputs []sim.Input
	for i := 1; i <= 8; i++ {
		inputs = append(inputs, sim.Input{Seq: uint64(i), DX: 1})
	}
	g.send(fmt.Sprintf(`{"v":1,"kind":"command","seq":1,"tick":%d,"feature":"movement","action":"input_batch","payload":%s}`,
		first.Tick, wire.EncodeInputBatch(nil, inputs)))
	moved := g.snapshotWhere("input 8 applied", func(s *wire.Snapshot) bool { return s.Seq == 8 })

	want, _ := sim.Replay(sim.NewColliders(m.World()), start, sim.Stride{}, inputs, sim.DefaultPlayerSpeed, m.Config.TickHz)
	if got := (sim.Vec{X: self(moved).X, Y: self(moved).Y}); got != want {
		t.Fatalf("after 8 inputs east from %v: at %v, want %v", start, got, want)
	}
	if want.X <= start.X {
		t.Fatalf("the spawn point is walled in to the east: %v", start)
	}

	t.Run("DeltaAgainstAck", func(t *testing.T) {
		g.t = t
		g.send(fmt.Sprintf(`{"v":1,"kind":"ack","tick":%d}`, moved.Tick))
		d := g.snapshotWhere("a delta against the ack", func(s *wire.Snapshot) bool { return !s.Full && s.BaseTick >= moved.Tick })
		if self(d) == nil || self(d).X != want.X {
			t.Fatalf("delta %+v", d)
		}
	})
	t.Run("MalformedCommandKeepsConnection", func(t *testing.T) {
		g.t = t
		for _, tc := range []struct{ msg, code string }{
			{`{"v":1,"kind":"command","seq":2,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":9,"dx":900,"dy":0}]}}`, wire.CodeBadDirection},
			{`{"v":1,"kind":"command","seq":3,"feature":"movement","action":"input_batch","payload":"left"}`, wire.CodeBadPayload},
			{`{"v":1,"kind":"command","seq":4,"feature":"magic","action":"fly"}`, wire.CodeUnknownCommand},
			{`{"v":1,"kind":"dance"}`, wire.CodeBadRequest},
		} {
			g.send(tc.msg)
			if e := g.next(); e["kind"] != "error" || e["code"] != tc.code {
				t.Fatalf("%s: got %v, want error %s", tc.msg, e, tc.code)
			}
		}
		g.send(`{"v":1,"kind":"command","seq":5,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":9,"dx":0,"dy":1}]}}`)
		g.snapshotWhere("input 9 after the errors", func(s *wire.Snapshot) bool { return s.Seq == 9 })
	})
	t.Run("DuplicateSeqIgnored", func(t *testing.T) {
		g.t = t
		g.send(`{"v":1,"kind":"command","seq":5,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":10,"dx":1,"dy":0}]}}`)
		g.send(`{"v":1,"kind":"command","seq":6,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":11,"dx":0,"dy":0}]}}`)
		if s := g.snapshotWhere("input 11", func(s *wire.Snapshot) bool { return s.Seq >= 10 }); s.Seq != 11 {
			t.Fatalf("seq %d: the command with a repeated seq was applied", s.Seq)
		}
	})
}

// TestProtocol_ResumeAfterTTLRefused checks that an unused session is released after
// MAP_RESUME_TTL_MS and its token refused.
func TestProtocol_ResumeAfterTTLRefused(t *testing.T) {
	f := mustOpenFakeOrch(t)
	m := mustOpenMap(t, f, func(c *mapenv.Config) { c.ResumeTTLMS = 300 })
	g, w := joinMap(t, f, m)
	g.c.Close()
	waitFor(t, "the unused session's release", func() bool { return m.Loop.Players() == 0 })
	late := dialMap(t, m)
	late.send(`{"v":1,"kind":"hello","resume":"` + w["resumeToken"].(string) + `"}`)
	if e := late.next(); e["kind"] != "error" || e["code"] != "ticket_invalid" {
		t.Fatalf("resume after the TTL: %v", e)
	}
	late.wantClose(websocket.ClosePolicyViolation)
}

// TestProtocol_SlowClientDropped floods the map with pings whose answers a client never
// reads: its queue fills, it is dropped, and the tick and the other player go on.
func TestProtocol_SlowClientDropped(t *testing.T) {
	f := mustOpenFakeOrch(t)
	m := mustOpenMap(t, f, nil)
	fast, _ := joinMap(t, f, m)

	// The slow client's socket takes little before it stops the sender: a small
	// receive buffer, which the kernel then does not grow.
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		return c, err
	}}
	c, _, err := d.Dial(m.GameURL()+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	slow := &player{t: t, c: c}
	slow.send(`{"v":1,"kind":"hello","ticket":"` + f.join(t, `{}`).Ticket + `"}`)

	ping := `{"v":1,"kind":"ping","t":1` + strings.Repeat("0", 3900) + `}`
	tick := m.Loop.Tick()
	for i := 0; i < 5000 && (i%50 != 0 || !strings.Contains(metrics(t, m), "mapyard_map_dropped_clients_total 1")); i++ {
		if err := slow.c.WriteMessage(websocket.TextMessage, []byte(ping)); err != nil {
			break // dropped: the socket is gone
		}
	}
	waitFor(t, "the slow client's drop", func() bool {
		return strings.Contains(metrics(t, m), "mapyard_map_dropped_clients_total 1")
	})
	waitFor(t, "the tick to go on", func() bool { return m.Loop.Tick() > tick+15 })
	s := fast.snapshotWhere("a fresh snapshot", func(s *wire.Snapshot) bool { return uint64(s.Tick) > tick })
	if self(s) == nil {
		t.Fatalf("the fast player's snapshot %+v", s)
	}
}

// TestProtocol_FlooderLimited sends 2,000 commands in one burst beside a normal
// player: the flooder's messages beyond its burst are refused with rate_limited and it
// is closed with 1008, while the normal player is sent a snapshot for (nearly) every
// snapshot tick throughout, and stays connected.
func TestProtocol_FlooderLimited(t *testing.T) {
	f := mustOpenFakeOrch(t)
	m := mustOpenMap(t, f, func(c *mapenv.Config) {
		c.ConnMsgRate, c.ConnMsgBurst, c.ConnByteRate, c.ConnByteBurst = 100, 200, 16384, 65536 // the defaults
	})
	normal, _ := joinMap(t, f, m)
	first := normal.snapshotWhere("the first snapshot", func(*wire.Snapshot) bool { return true })

	flooder, _ := joinMap(t, f, m)
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		for i := 1; i <= 2000; i++ {
			msg := fmt.Sprintf(`{"v":1,"kind":"command","seq":%d,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":%d,"dx":1,"dy":0}]}}`, i, i)
			if flooder.c.WriteMessage(websocket.TextMessage, []byte(msg)) != nil {
				return // closed by the map
			}
		}
	}()
	// The normal player reads on while the flooder floods and is refused.
	var snapshots int
	var last *wire.Snapshot
	read := func(n int) {
		for i := 0; i < n; i++ {
			last = normal.snapshotWhere("a snapshot", func(*wire.Snapshot) bool { return true })
			snapshots++
		}
	}
	read(10)

	refused := 0
	_ = flooder.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		typ, data, err := flooder.c.ReadMessage()
		if err != nil {
			if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
				t.Fatalf("the flooder's connection ended with %v, want close 1008", err)
			}
			break
		}
		if typ == websocket.TextMessage && strings.Contains(string(data), `"code":"rate_limited"`) {
			refused++
		}
	}
	<-flooded
	if refused == 0 {
		t.Fatal("the flooder was closed without a rate_limited error")
	}
	read(20)

	// 15 snapshots a second at 30 ticks a second: one every second tick. Allow a few
	// missed to a loaded machine's catch-up (one snapshot per wake-up), far fewer than a
	// stalled stream would miss.
	want := int(last.Tick-first.Tick) / (m.Config.TickHz / m.Config.SnapshotHz)
	if snapshots < want*4/5 {
		t.Fatalf("the normal player got %d snapshots over %d snapshot ticks", snapshots, want)
	}
	body := metrics(t, m)
	for _, line := range []string{`mapyard_map_rate_limited_total{reason="closed"} 1`, `mapyard_map_rate_limited_total{reason="messages"}`} {
		if !strings.Contains(body, line) {
			t.Errorf("metrics lack %s", line)
		}
	}
	if strings.Contains(body, `mapyard_map_rate_limited_total{reason="messages"} 0`) {
		t.Error("no refused message counted")
	}
}
