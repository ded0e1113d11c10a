package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// pacedMap is a fake map whose snapshots the test sends (snapshot), so that what the
// client sends between two of them can be checked message by message. It records
// every message after the hello and answers pings.
type pacedMap struct {
	t   *testing.T
	srv *httptest.Server

	// discard reads messages without recording them (a benchmark's map).
	discard bool

	mu   sync.Mutex
	ws   *websocket.Conn
	enc  *wire.Encoder
	cl   *wire.Client
	tick uint32
	msgs []wire.Inbound
}

func newPacedMap(t *testing.T) *pacedMap {
	m := &pacedMap{t: t, enc: wire.NewEncoder(0), cl: wire.NewClient(0)}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *pacedMap) url() string { return "ws" + strings.TrimPrefix(m.srv.URL, "http") + "/ws" }

func (m *pacedMap) serve(w http.ResponseWriter, r *http.Request) {
	ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	var hello wire.Inbound
	if err := ws.ReadJSON(&hello); err != nil {
		return
	}
	m.mu.Lock()
	m.ws = ws
	_ = ws.WriteJSON(wire.Welcome{V: 1, Kind: wire.KindWelcome, CharacterID: "c1", InstanceID: "a-1", MapID: "a",
		SnapshotHz: 15, TickHz: 30, SnapshotFormat: wire.FormatVersion})
	m.mu.Unlock()
	for m.discard {
		_, r, err := ws.NextReader()
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, r)
	}
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var in wire.Inbound
		if err := json.Unmarshal(data, &in); err != nil {
			m.t.Errorf("message %s: %v", data, err)
			return
		}
		m.mu.Lock()
		if in.Tick != 0 {
			m.cl.Ack(uint32(in.Tick))
		}
		if in.Kind == wire.KindPing {
			// settle's: answered, not recorded.
			_ = ws.WriteJSON(wire.Pong{V: 1, Kind: wire.KindPong, T: in.T})
		} else {
			m.msgs = append(m.msgs, in)
		}
		m.mu.Unlock()
	}
}

// snapshot sends the next snapshot (two ticks on), the player's entity moved, and
// returns its tick.
func (m *pacedMap) snapshot() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tick += 2
	m.enc.Begin(m.tick)
	m.enc.Set(0, wire.EntityState{ID: 1, Kind: 1, X: int32(16 * m.tick), Y: 32})
	frame, _ := m.enc.Encode(nil, m.cl, 0, 0, []int32{0})
	if err := m.ws.WriteMessage(websocket.BinaryMessage, frame); err != nil {
		m.t.Fatal(err)
	}
	return uint64(m.tick)
}

// messages returns what the map received after the hello, and forgets it.
func (m *pacedMap) messages() []wire.Inbound {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.msgs
	m.msgs = nil
	return out
}

// settle waits until the map has read everything c sent before: a ping's pong follows
// it on the one connection (the map does not record pings).
func (m *pacedMap) settle(t *testing.T, c *client.Client) {
	t.Helper()
	pongs := len(c.Stats().RTT)
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	until(t, "a pong", func() bool { return len(c.Stats().RTT) > pongs })
}

// received waits until the map recorded a message.
func (m *pacedMap) received(t *testing.T, c *client.Client) {
	t.Helper()
	until(t, "a message", func() bool {
		m.settle(t, c)
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.msgs) > 0
	})
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (k *fakeClock) Now() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.now
}

func (k *fakeClock) advance(d time.Duration) {
	k.mu.Lock()
	k.now = k.now.Add(d)
	k.mu.Unlock()
}

// batchOf returns the inputs of an input_batch command, failing on anything else.
func batchOf(t *testing.T, in wire.Inbound) []wire.InputEntry {
	t.Helper()
	if in.Kind != wire.KindCommand || in.Feature != wire.FeatureMovement || in.Action != wire.ActionInputBatch {
		t.Fatalf("message %+v, want an input_batch command", in)
	}
	inputs, err := wire.DecodeInputBatch(in.Payload, nil)
	if err != nil {
		t.Fatalf("payload %s: %v", in.Payload, err)
	}
	out := make([]wire.InputEntry, len(inputs))
	for i, x := range inputs {
		out[i] = wire.InputEntry{Seq: x.Seq, DX: int(x.DX), DY: int(x.DY)}
	}
	return out
}

// moveN gathers n inputs east.
func moveN(t *testing.T, c *client.Client, n int) {
	t.Helper()
	for range n {
		if _, err := c.Move(127, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBatching checks the rule of docs/netcode.md's Commands and acks: the inputs a
// client gathers leave in one input_batch command per snapshot it receives, carrying
// that snapshot's ack, or after client.BatchIdle without one; the clock is the test's.
func TestBatching(t *testing.T) {
	open := func(t *testing.T, opt client.Options) (*pacedMap, *client.Client, *fakeClock) {
		k := &fakeClock{now: time.Unix(1000, 0)}
		opt.Now = k.Now
		m := newPacedMap(t)
		c := dial(t, m.url(), opt)
		return m, c, k
	}
	t.Run("OneBatchPerSnapshotCarryingItsAck", func(t *testing.T) {
		m, c, _ := open(t, client.Options{})
		seq := uint64(0)
		for round, n := range []int{2, 3, 1, 2} {
			moveN(t, c, n)
			m.settle(t, c)
			if got := m.messages(); len(got) != 0 {
				t.Fatalf("round %d: %d inputs gathered sent %+v before a snapshot came", round, n, got)
			}
			tick := m.snapshot()
			m.received(t, c)
			got := m.messages()
			if len(got) != 1 || got[0].Tick != tick {
				t.Fatalf("round %d: the snapshot of tick %d got %+v, want one command acking it", round, tick, got)
			}
			inputs := batchOf(t, got[0])
			if len(inputs) != n {
				t.Fatalf("round %d: batch %+v, want the %d inputs gathered", round, inputs, n)
			}
			for _, in := range inputs {
				if seq++; in != (wire.InputEntry{Seq: seq, DX: 127}) {
					t.Fatalf("round %d: input %+v, want seq %d east", round, in, seq)
				}
			}
		}
		if s := c.Stats(); s.BadSnapshots != 0 || s.FullSnapshots != 1 {
			t.Fatalf("stats %+v: want deltas against the acks the batches carried", s)
		}
	})
	t.Run("AckAloneWhenNothingGathered", func(t *testing.T) {
		m, c, _ := open(t, client.Options{})
		tick := m.snapshot()
		m.received(t, c)
		if got := m.messages(); len(got) != 1 || got[0].Kind != wire.KindAck || got[0].Tick != tick {
			t.Fatalf("got %+v, want one ack of tick %d", got, tick)
		}
	})
	t.Run("NoAutoAckSendsNothingWhenNothingGathered", func(t *testing.T) {
		m, c, _ := open(t, client.Options{NoAutoAck: true})
		for range 3 {
			m.snapshot()
		}
		until(t, "three snapshots", func() bool { return c.Stats().Snapshots == 3 })
		m.settle(t, c)
		if got := m.messages(); len(got) != 0 {
			t.Fatalf("got %+v, want nothing", got)
		}
		moveN(t, c, 1)
		tick := m.snapshot()
		m.received(t, c)
		if got := m.messages(); len(got) != 1 || got[0].Tick != tick || len(batchOf(t, got[0])) != 1 {
			t.Fatalf("got %+v, want one batch acking tick %d", got, tick)
		}
	})
	t.Run("SendsAfterBatchIdleWithoutASnapshot", func(t *testing.T) {
		m, c, k := open(t, client.Options{})
		for round := range 3 {
			moveN(t, c, 1)
			k.advance(client.BatchIdle / 2)
			moveN(t, c, 1)
			m.settle(t, c)
			if got := m.messages(); len(got) != 0 {
				t.Fatalf("round %d: sent %+v within BatchIdle", round, got)
			}
			k.advance(client.BatchIdle / 2)
			moveN(t, c, 1) // nothing came for BatchIdle: this one leaves with the two before
			m.settle(t, c)
			got := m.messages()
			if len(got) != 1 || len(batchOf(t, got[0])) != 3 {
				t.Fatalf("round %d: got %+v, want one batch of 3 inputs", round, got)
			}
		}
	})
	t.Run("SendsWhenTheCallerStops", func(t *testing.T) {
		m, c, k := open(t, client.Options{})
		moveN(t, c, 2)
		k.advance(client.BatchIdle)
		// Move's timer fires (on the wall clock) and finds BatchIdle passed.
		m.received(t, c)
		if got := m.messages(); len(got) != 1 || len(batchOf(t, got[0])) != 2 {
			t.Fatalf("got %+v, want one batch of 2 inputs", got)
		}
	})
	t.Run("InputsLeaveBeforeACommand", func(t *testing.T) {
		m, c, _ := open(t, client.Options{})
		moveN(t, c, 2)
		seq, err := c.Command("items", "pickup", map[string]string{"itemId": "i1"})
		if err != nil {
			t.Fatal(err)
		}
		m.settle(t, c)
		got := m.messages()
		if len(got) != 2 || len(batchOf(t, got[0])) != 2 || got[1].Action != "pickup" || got[1].Seq != seq || got[0].Seq >= seq {
			t.Fatalf("got %+v, want the batch of 2 inputs, then the pickup", got)
		}
	})
	t.Run("SendEachInputAsOldClients", func(t *testing.T) {
		m, c, _ := open(t, client.Options{SendEachInput: true})
		moveN(t, c, 3)
		m.settle(t, c)
		got := m.messages()
		if len(got) != 3 {
			t.Fatalf("got %d messages, want one per input", len(got))
		}
		for i, in := range got {
			if b := batchOf(t, in); len(b) != 1 || b[0].Seq != uint64(i+1) || in.Seq != uint64(i+1) {
				t.Fatalf("message %d: %+v with %+v", i, in, b)
			}
		}
	})
	t.Run("FullBatchLeavesAtOnce", func(t *testing.T) {
		m, c, _ := open(t, client.Options{})
		moveN(t, c, wire.MaxInputsPerBatch+1)
		m.settle(t, c)
		got := m.messages()
		if len(got) != 1 || len(batchOf(t, got[0])) != wire.MaxInputsPerBatch {
			t.Fatalf("got %+v, want one batch of the most the map takes", got)
		}
	})
}

// BenchmarkMoveBatchOfTwo is a bot's input path at the default rates: two Moves, the
// second sending both in one input_batch (here because BatchIdle passed on the test's
// clock; a snapshot does the same). No JSON encoding is involved: the command is
// appended by hand into one reused buffer. The allocations are the WebSocket
// library's, one frame writer per message (and the fake map's reads, in process).
func BenchmarkMoveBatchOfTwo(b *testing.B) {
	k := &fakeClock{now: time.Unix(1000, 0)}
	m := &pacedMap{discard: true}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	defer m.srv.Close()
	c, err := client.Dial(context.Background(), m.url(), client.Hello{Ticket: "good"}, client.Options{Now: k.Now})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Move(127, 0); err != nil {
			b.Fatal(err)
		}
		k.advance(client.BatchIdle)
		if _, err := c.Move(0, -127); err != nil {
			b.Fatal(err)
		}
	}
}
