package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// fakeMap is a hand-written map server speaking the game protocol: it welcomes the
// ticket "good" (and, if set, the transfer token it expects), sends a snapshot per
// command it receives, answers pings, on the command action "portal" sends a transfer
// to its next map, and on "bye" breaks the connection.
type fakeMap struct {
	t     *testing.T
	srv   *httptest.Server
	name  string
	token string // the transfer token it accepts besides "good"
	next  *fakeMap
	// format is the snapshot format its welcome names (0: wire.FormatVersion).
	format int
	// formats is what the last hello said it decodes.
	formats []int

	mu       sync.Mutex
	resumes  int // hellos with a resume token
	acks     []uint64
	inputs   []wire.InputEntry
	commands []wire.Inbound
}

func newFakeMap(t *testing.T, name string) *fakeMap {
	m := &fakeMap{t: t, name: name}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *fakeMap) url() string { return "ws" + strings.TrimPrefix(m.srv.URL, "http") + "/ws" }

func (m *fakeMap) serve(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	var hello wire.Inbound
	if err := ws.ReadJSON(&hello); err != nil {
		return
	}
	if hello.Ticket != "good" && (m.token == "" || hello.Ticket != m.token) && hello.Resume != "rt" {
		_ = ws.WriteJSON(map[string]any{"v": 1, "kind": "error", "code": "ticket_invalid", "message": "no"})
		return
	}
	m.mu.Lock()
	if hello.Resume != "" {
		m.resumes++
	}
	m.formats = hello.Formats
	format := m.format
	m.mu.Unlock()
	if format == 0 {
		format = wire.FormatVersion
	}
	_ = ws.WriteJSON(wire.Welcome{V: 1, Kind: wire.KindWelcome, CharacterID: "c1", InstanceID: m.name + "-1", MapID: m.name, ResumeToken: "rt",
		Resumed: hello.Resume != "", SnapshotFormat: format})
	enc, cl := wire.NewEncoder(0), wire.NewClient(0)
	tick := uint32(0)
	for {
		var in wire.Inbound
		if err := ws.ReadJSON(&in); err != nil {
			return
		}
		m.mu.Lock()
		switch in.Kind {
		case wire.KindAck:
			m.acks = append(m.acks, in.Tick)
			cl.Ack(uint32(in.Tick))
		case wire.KindPing:
			_ = ws.WriteJSON(wire.Pong{V: 1, Kind: wire.KindPong, T: in.T})
		case wire.KindCommand:
			m.commands = append(m.commands, in)
			if in.Tick != 0 {
				cl.Ack(uint32(in.Tick))
			}
			if in.Action == "gone" {
				// The edge's close for a map that went away.
				_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(public.CloseMapGone, "map gone"))
				m.mu.Unlock()
				return
			}
			if in.Action == "bye" {
				m.mu.Unlock()
				return // the deferred Close breaks the connection without a close frame
			}
			if in.Action == "frames" {
				// n snapshots at once, each a delta against the one before (as if
				// acknowledged in time), the first entity moving or standing still.
				var f struct {
					N    int
					Move bool
				}
				_ = json.Unmarshal(in.Payload, &f)
				for range f.N {
					cl.Ack(tick)
					tick++
					enc.Begin(tick)
					x := int32(5)
					if f.Move {
						x = int32(16 * tick)
					}
					enc.Set(0, wire.EntityState{ID: 1, Kind: 1, X: x, Y: 32})
					frame, _ := enc.Encode(nil, cl, 0, 0, []int32{0})
					_ = ws.WriteMessage(websocket.BinaryMessage, frame)
				}
				m.mu.Unlock()
				continue
			}
			if in.Action == "moving" {
				// A live upgrade's move on the same socket: the moving event, the next
				// container's welcome, then its full snapshot with the player where it stood.
				_ = ws.WriteJSON(wire.Event{V: 1, Kind: wire.KindEvent, Name: wire.EventMoving, Data: wire.Moving{Reason: "upgrade"}})
				_ = ws.WriteJSON(wire.Welcome{V: 1, Kind: wire.KindWelcome, CharacterID: "c1", InstanceID: m.name + "-1", MapID: m.name,
					ResumeToken: "rt", SnapshotFormat: wire.FormatVersion})
				enc, cl = wire.NewEncoder(0), wire.NewClient(0)
				enc.Begin(tick + 1)
				enc.Set(0, wire.EntityState{ID: 1, Kind: 1, X: int32(16 * tick), Y: 32})
				frame, _ := enc.Encode(nil, cl, 0, 0, []int32{0})
				_ = ws.WriteMessage(websocket.BinaryMessage, frame)
				m.mu.Unlock()
				continue
			}
			if in.Action == "portal" {
				_ = ws.WriteJSON(wire.Transfer{V: 1, Kind: wire.KindTransfer, Token: "tok", WS: "/next/ws", ToInstanceID: m.next.name + "-1"})
				m.mu.Unlock()
				return
			}
			var b wire.InputBatch
			_ = json.Unmarshal(in.Payload, &b)
			m.inputs = append(m.inputs, b.Inputs...)
			tick++
			enc.Begin(tick)
			enc.Set(0, wire.EntityState{ID: 1, Kind: 1, X: int32(16 * tick), Y: 32})
			enc.Set(1, wire.EntityState{ID: 2, Kind: 2, X: 5, Y: 5})
			frame, _ := enc.Encode(nil, cl, b.Inputs[len(b.Inputs)-1].Seq, 0, []int32{0, 1})
			_ = ws.WriteMessage(websocket.BinaryMessage, frame)
		}
		m.mu.Unlock()
	}
}

func dial(t *testing.T, url string, opt client.Options) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), url, client.Hello{Ticket: "good"}, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// until waits for cond, polling the client's event channel as the clock.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestClient(t *testing.T) {
	t.Run("MovesAndMirrorsSnapshots", func(t *testing.T) {
		m := newFakeMap(t, "a")
		c := dial(t, m.url(), client.Options{})
		if w := c.Welcome(); w.CharacterID != "c1" || w.ResumeToken != "rt" || w.SnapshotFormat != wire.FormatVersion {
			t.Fatalf("welcome %+v", w)
		}
		for i := 0; i < 3; i++ {
			if _, err := c.Move(127, -1); err != nil {
				t.Fatal(err)
			}
			n := int64(i + 1)
			until(t, "a snapshot per input", func() bool { return c.Stats().Snapshots == n })
		}
		st, s := c.State(), c.Stats()
		self, ok := st.SelfEntity()
		if !ok || st.Seq != 3 || st.Tick != 3 || len(st.Entities) != 2 {
			t.Fatalf("mirror %+v", st)
		}
		if x, y := client.Position(self); x != 3 || y != 2 {
			t.Fatalf("self at (%v, %v), want (3, 2)", x, y)
		}
		if s.FullSnapshots != 1 || s.BadSnapshots != 0 || s.EntitiesSeen != 6 {
			t.Fatalf("stats %+v: want one full snapshot then deltas against the acked ones", s)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.inputs) != 3 || m.inputs[2] != (wire.InputEntry{Seq: 3, DX: 127, DY: -1}) {
			t.Fatalf("inputs %+v", m.inputs)
		}
		if m.commands[2].Seq != 3 || m.commands[2].Tick != 2 {
			t.Fatalf("third command seq %d tick %d, want 3 carrying the newest tick 2", m.commands[2].Seq, m.commands[2].Tick)
		}
	})
	// A client that sends nothing acks every snapshot that changed its view and, while
	// nothing changes, one in client.AutoAckQuiet.
	t.Run("AcksWhatChanged", func(t *testing.T) {
		m := newFakeMap(t, "a")
		c := dial(t, m.url(), client.Options{})
		count := func() int {
			m.mu.Lock()
			defer m.mu.Unlock()
			return len(m.acks)
		}
		// acks has the fake send 24 snapshots and returns the acks they got: want of
		// them at least, then whatever the client sent before a ping answered after.
		acks := func(move bool, want int) int {
			t.Helper()
			before, n := count(), c.Stats().Snapshots
			if _, err := c.Command("test", "frames", map[string]any{"n": 24, "move": move}); err != nil {
				t.Fatal(err)
			}
			until(t, "24 snapshots", func() bool { return c.Stats().Snapshots == n+24 })
			until(t, "the acks", func() bool { return count()-before >= want })
			pongs := len(c.Stats().RTT)
			if err := c.Ping(); err != nil {
				t.Fatal(err)
			}
			until(t, "a pong", func() bool { return len(c.Stats().RTT) > pongs })
			return count() - before
		}
		if got := acks(true, 24); got != 24 {
			t.Fatalf("24 snapshots that each moved an entity got %d acks, want 24", got)
		}
		// The first of these moves the entity back to rest; the other 23 change nothing.
		if got, want := acks(false, 1+23/client.AutoAckQuiet), 1+23/client.AutoAckQuiet; got != want {
			t.Fatalf("24 snapshots, the first changing the view, got %d acks, want %d", got, want)
		}
	})
	t.Run("MeasuresRTT", func(t *testing.T) {
		c := dial(t, newFakeMap(t, "a").url(), client.Options{})
		if err := c.Ping(); err != nil {
			t.Fatal(err)
		}
		until(t, "a pong", func() bool { return len(c.Stats().RTT) == 1 })
		if rtt := c.Stats().RTT[0]; rtt <= 0 || rtt > 5*time.Second {
			t.Fatalf("rtt %v", rtt)
		}
	})
	t.Run("SaysWhichFormatItDecodes", func(t *testing.T) {
		m := newFakeMap(t, "a")
		dial(t, m.url(), client.Options{})
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.formats) != 1 || m.formats[0] != wire.FormatVersion {
			t.Fatalf("hello formats %v, want [%d]", m.formats, wire.FormatVersion)
		}
	})
	t.Run("ErrWelcomeOfAnotherFormat", func(t *testing.T) {
		m := newFakeMap(t, "a")
		m.format = 1
		_, err := client.Dial(context.Background(), m.url(), client.Hello{Ticket: "good"}, client.Options{})
		if err == nil || !strings.Contains(err.Error(), "snapshot format 1") {
			t.Fatalf("dial a map of format 1: %v", err)
		}
	})
	t.Run("RefusedHello", func(t *testing.T) {
		m := newFakeMap(t, "a")
		_, err := client.Dial(context.Background(), m.url(), client.Hello{Ticket: "bad"}, client.Options{})
		var se *client.ServerError
		if !errors.As(err, &se) || se.Code != "ticket_invalid" {
			t.Fatalf("err=%v, want ticket_invalid", err)
		}
	})
	t.Run("FollowsTransfer", func(t *testing.T) {
		a, b := newFakeMap(t, "a"), newFakeMap(t, "b")
		a.next, b.token = b, "tok"
		c := dial(t, a.url(), client.Options{Resolve: func(path string) string {
			if path != "/next/ws" {
				t.Errorf("resolve %q", path)
			}
			return b.url()
		}})
		if _, err := c.Command("portal", "portal", map[string]int{}); err != nil {
			t.Fatal(err)
		}
		until(t, "the welcome of map b", func() bool { return c.Welcome().MapID == "b" })
		if _, err := c.Move(1, 0); err != nil {
			t.Fatal(err)
		}
		until(t, "a snapshot from map b", func() bool { return c.Stats().Snapshots == 1 })
		if c.Stats().Dropped || c.Stats().Transfers != 1 {
			t.Fatalf("stats %+v", c.Stats())
		}
	})
	t.Run("ServerCloseIsADrop", func(t *testing.T) {
		m := newFakeMap(t, "a")
		c := dial(t, m.url(), client.Options{})
		if _, err := c.Command("test", "bye", nil); err != nil {
			t.Fatal(err)
		}
		<-c.Done()
		if !c.Stats().Dropped {
			t.Fatal("a connection the server broke must count as dropped")
		}
	})
	t.Run("ResumesAfterDrop", func(t *testing.T) {
		m := newFakeMap(t, "a")
		c := dial(t, m.url(), client.Options{})
		token := c.Welcome().ResumeToken
		c.Drop()
		r, err := client.Dial(context.Background(), m.url(), client.Hello{Resume: token}, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if w := r.Welcome(); !w.Resumed || w.CharacterID != "c1" {
			t.Fatalf("welcome %+v, want the resumed character", w)
		}
	})
	t.Run("ResumesByItself", func(t *testing.T) {
		m := newFakeMap(t, "a")
		c := dial(t, m.url(), client.Options{Resume: true})
		if _, err := c.Command("test", "bye", nil); err != nil { // the map breaks the connection
			t.Fatal(err)
		}
		until(t, "a resume", func() bool { return c.Stats().Resumes == 1 })
		if w := c.Welcome(); !w.Resumed {
			t.Fatalf("welcome %+v, want a resumed one", w)
		}
		st := c.Stats()
		if st.Dropped || len(st.ResumeTimes) != 1 || st.ResumeTimes[0] <= 0 {
			t.Fatalf("stats %+v: want one timed resume and no drop", st)
		}
		// The resumed connection carries commands.
		if _, err := c.Move(1, 0); err != nil {
			t.Fatal(err)
		}
		until(t, "a snapshot on the resumed connection", func() bool { return c.Stats().Snapshots >= 1 })
	})
	// The edge's map-gone close: the process that knew the resume token is gone, so the
	// client joins again at once, without a resume the new process cannot know.
	t.Run("RejoinsAtOnceWhenTheMapIsGone", func(t *testing.T) {
		m := newFakeMap(t, "a")
		var rejoins atomic.Int32
		c := dial(t, m.url(), client.Options{Resume: true, Rejoin: func(context.Context) (string, client.Hello, error) {
			rejoins.Add(1)
			return m.url(), client.Hello{Ticket: "good"}, nil
		}})
		if _, err := c.Command("test", "gone", nil); err != nil {
			t.Fatal(err)
		}
		// Once the rejoin worked (not merely began), inputs go on the new connection.
		until(t, "a rejoin", func() bool { return rejoins.Load() == 1 && c.Stats().Rejoins == 1 })
		if _, err := c.Move(1, 0); err != nil {
			t.Fatal(err)
		}
		until(t, "a snapshot on the new connection", func() bool { return c.Stats().Snapshots >= 1 })
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.resumes != 0 {
			t.Fatalf("%d resumes tried after the map-gone close, want none", m.resumes)
		}
	})
	t.Run("TracksAMoveOnItsSocket", func(t *testing.T) {
		m := newFakeMap(t, "a")
		c := dial(t, m.url(), client.Options{TrackMoves: true})
		if _, err := c.Move(1, 0); err != nil {
			t.Fatal(err)
		}
		until(t, "a snapshot", func() bool { return c.Stats().Snapshots == 1 })
		if _, err := c.Command("test", "moving", nil); err != nil {
			t.Fatal(err)
		}
		until(t, "the move", func() bool { return len(c.Stats().Moves) == 1 })
		mv := c.Stats().Moves[0]
		if mv.Cause != client.MoveMoving || mv.SocketClosed || !mv.Back || !mv.HavePos || mv.Pause <= 0 {
			t.Fatalf("move %+v: want one on the same socket, back, timed", mv)
		}
		if mv.FromX != mv.ToX || mv.FromY != mv.ToY {
			t.Fatalf("move %+v: the player stood still and must be where it was", mv)
		}
	})
	t.Run("TracksAResume", func(t *testing.T) {
		m := newFakeMap(t, "a")
		c := dial(t, m.url(), client.Options{Resume: true, TrackMoves: true})
		if _, err := c.Move(1, 0); err != nil {
			t.Fatal(err)
		}
		until(t, "a snapshot", func() bool { return c.Stats().Snapshots == 1 })
		if _, err := c.Command("test", "bye", nil); err != nil {
			t.Fatal(err)
		}
		until(t, "a resume", func() bool { return c.Stats().Resumes == 1 })
		if _, ok := c.PendingMove(); !ok {
			t.Fatal("a resumed player without a snapshot yet is still moving")
		}
		if _, err := c.Move(1, 0); err != nil {
			t.Fatal(err)
		}
		until(t, "the move", func() bool { return len(c.Stats().Moves) == 1 })
		if mv := c.Stats().Moves[0]; mv.Cause != client.MoveResume || !mv.SocketClosed || !mv.Back {
			t.Fatalf("move %+v: want a resume with the socket closed", mv)
		}
	})
	t.Run("OriginOfURL", func(t *testing.T) {
		if got := client.Origin("ws://127.0.0.1:8080/maps/a-1/ws"); got != "ws://127.0.0.1:8080" {
			t.Fatalf("origin %q", got)
		}
	})
}
