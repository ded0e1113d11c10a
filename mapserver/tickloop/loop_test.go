package tickloop_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/outbox"
	"github.com/mapyard/mapyard/mapserver/tickloop"
	"github.com/mapyard/mapyard/mapserver/wire"
	"github.com/mapyard/mapyard/mapserver/ws"
)

// fakeOrch is the Redeemer and the Link: tickets "char-N" (or "char-N#k", another
// ticket of the same character) redeem once to character char-N; transfers are
// granted, or denied with deny when it is set, once hold (when set) is closed.
type fakeOrch struct {
	mu       sync.Mutex
	used     map[string]bool
	pushes   []record.CharacterStatePayload
	pushedID []string
	// instancePushes are the partitions pushed with Push.
	instancePushes []string
	requests       []mapcontract.TransferRequest
	reports        []mapcontract.TransferResult
	deny           string
	hold           chan struct{}
	pushDue        bool
	// criticals are the critical events sent; refuse, when set, answers them.
	criticals []record.CriticalEvent
	refuse    error
	away      bool
	// holdCritical, when set, holds the answers to critical events until it is closed.
	holdCritical chan struct{}
}

var _ tickloop.Link = (*fakeOrch)(nil)

func (f *fakeOrch) Redeem(_ context.Context, r mapcontract.RedeemRequest) (*mapcontract.RedeemResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !strings.HasPrefix(r.Token, "char-") && !strings.HasPrefix(r.Token, "tr-") && !strings.HasPrefix(r.Token, "guest-") {
		return nil, apierr.Errorf(apierr.ETICKETINVALID, "bad signature")
	}
	if f.used[r.Token] {
		return nil, apierr.Errorf(apierr.ETICKETUSED, "ticket already used")
	}
	f.used[r.Token] = true
	if id, ok := strings.CutPrefix(r.Token, "tr-"); ok {
		return &mapcontract.RedeemResult{Kind: "transfer", CharacterID: id, Epoch: 9, TransferID: r.Token,
			State: &record.CharacterState{X: 42, Attributes: json.RawMessage(`{"gold":3}`)}}, nil
	}
	id, _, _ := strings.Cut(r.Token, "#")
	return &mapcontract.RedeemResult{Kind: "join", CharacterID: id, Name: "Name of " + id, Epoch: 2, Disposable: strings.HasPrefix(id, "guest-")}, nil
}

func (f *fakeOrch) PushDue() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	due := f.pushDue
	f.pushDue = false
	return due
}

func (f *fakeOrch) PushCharacter(id string, epoch, tick int64, st record.CharacterStatePayload) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pushes = append(f.pushes, st)
	f.pushedID = append(f.pushedID, id)
	return int64(len(f.pushes)), nil
}

func (f *fakeOrch) Push(partition string, tick int64, payload json.RawMessage) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.instancePushes = append(f.instancePushes, partition)
	return 1, nil
}

func (f *fakeOrch) RequestTransfer(r mapcontract.TransferRequest, done func(outbox.TransferOutcome)) error {
	f.mu.Lock()
	f.requests = append(f.requests, r)
	deny, hold := f.deny, f.hold
	f.mu.Unlock()
	go func() {
		if hold != nil {
			<-hold
		}
		if deny != "" {
			done(outbox.TransferOutcome{Err: apierr.Errorf(deny, "the destination is resting"), Code: deny})
			return
		}
		done(outbox.TransferOutcome{Answer: &mapcontract.TransferAnswer{
			TransferID: r.TransferID, Token: "tok", ToInstanceID: "frontier-1", WS: public.WSPath("frontier-1"), ExpiresAtMs: 99,
		}})
	}()
	return nil
}

func (f *fakeOrch) ReportTransfer(r mapcontract.TransferResult) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports = append(f.reports, r)
	return nil
}

func (f *fakeOrch) Pushed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.pushedID...)
}

type harness struct {
	loop *tickloop.Loop
	game *fakeGame
	orch *fakeOrch
	url  string
}

func newHarness(t *testing.T, tune func(*harness, *ws.Server)) *harness {
	t.Helper()
	h := &harness{game: newFakeGame(), orch: &fakeOrch{used: map[string]bool{}}}
	h.loop = tickloop.New(h.orch, h.orch, 30, 15, slog.New(slog.DiscardHandler))
	h.loop.Metrics = tickloop.NewMetrics(nil)
	srv := ws.NewServer(h.loop, nil)
	if tune != nil {
		tune(h, srv)
	}
	if err := h.loop.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.loop.Close() })
	cfg, err := mapgen.Resolve("forest-1", mapgen.DefaultMapID, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.loop.SetWorld(tickloop.World{Config: cfg, Hash: "hash-1"}, h.game)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	h.url = "ws" + strings.TrimPrefix(ts.URL, "http")
	return h
}

// client is a test player: it reads in the background, keeping JSON messages and
// snapshots apart.
type client struct {
	t    *testing.T
	c    *websocket.Conn
	msgs chan map[string]any
	snap chan fakeSnapshot
	end  chan error
	bad  atomic.Int64 // binary frames that were not a snapshot
}

func (h *harness) dial(t *testing.T, hello string) *client {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(h.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cl := &client{t: t, c: c, msgs: make(chan map[string]any, 64), snap: make(chan fakeSnapshot, 1024), end: make(chan error, 1)}
	go func() {
		for {
			typ, data, err := c.ReadMessage()
			if err != nil {
				cl.end <- err
				return
			}
			if typ == websocket.BinaryMessage {
				var s fakeSnapshot
				if json.Unmarshal(data, &s) != nil {
					cl.bad.Add(1)
					continue
				}
				select {
				case cl.snap <- s:
				default:
				}
				continue
			}
			var m map[string]any
			if json.Unmarshal(data, &m) == nil {
				cl.msgs <- m
			}
		}
	}()
	cl.send(hello)
	return cl
}

func (c *client) send(msg string) {
	c.t.Helper()
	if err := c.c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) next() map[string]any {
	c.t.Helper()
	// A message read before the connection ended comes first, even when both wait.
	select {
	case m := <-c.msgs:
		return m
	default:
	}
	select {
	case m := <-c.msgs:
		return m
	case err := <-c.end:
		c.t.Fatalf("connection ended: %v", err)
	case <-time.After(5 * time.Second):
		c.t.Fatal("no message within 5s")
	}
	return nil
}

// snapshotWhere waits for a snapshot that satisfies ok.
func (c *client) snapshotWhere(what string, ok func(fakeSnapshot) bool) fakeSnapshot {
	c.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case s := <-c.snap:
			if ok(s) {
				return s
			}
		case <-deadline:
			c.t.Fatalf("no snapshot with %s within 5s", what)
		}
	}
}

func (c *client) wantClose(code int) {
	c.t.Helper()
	select {
	case err := <-c.end:
		if !websocket.IsCloseError(err, code) {
			c.t.Fatalf("connection ended with %v, want close %d", err, code)
		}
	case <-time.After(5 * time.Second):
		c.t.Fatalf("connection not closed within 5s, want %d", code)
	}
}

func (c *client) welcome() map[string]any {
	c.t.Helper()
	w := c.next()
	if w["kind"] != "welcome" {
		c.t.Fatalf("got %v, want welcome", w)
	}
	return w
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, 5*time.Second, what, cond)
}

func waitWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestJoin_MoveAckFullThenDelta(t *testing.T) {
	h := newHarness(t, nil)
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	w := c.welcome()
	if w["characterId"] != "char-1" || w["epoch"] != float64(2) || w["instanceId"] != "forest-1" || w["worldHash"] != "hash-1" ||
		w["tickHz"] != float64(30) || w["snapshotHz"] != float64(15) || w["resumeToken"] == "" || w["resumeTtlMs"] != float64(10000) ||
		w["snapshotFormat"] != float64(wire.FormatVersion) {
		t.Fatalf("welcome %v", w)
	}
	if h.loop.Players() != 1 {
		t.Fatalf("players %d, want 1", h.loop.Players())
	}
	first := c.snapshotWhere("full", func(s fakeSnapshot) bool { return s.Full })
	if first.X != 100 {
		t.Fatalf("first snapshot %+v", first)
	}

	t.Run("MoveAsInputsSay", func(t *testing.T) {
		c.send(`{"v":1,"kind":"command","seq":1,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":1,"dx":2},{"seq":2,"dx":3}]}}`)
		s := c.snapshotWhere("both inputs", func(s fakeSnapshot) bool { return s.Ack == 2 })
		if s.X != 105 {
			t.Fatalf("x %v after inputs +2 +3 from 100", s.X)
		}
	})
	t.Run("DuplicateSeqIgnored", func(t *testing.T) {
		c.send(`{"v":1,"kind":"command","seq":1,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":3,"dx":50}]}}`)
		c.send(`{"v":1,"kind":"command","seq":2,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":4,"dx":1}]}}`)
		s := c.snapshotWhere("input 4", func(s fakeSnapshot) bool { return s.Ack == 4 })
		if s.X != 106 {
			t.Fatalf("x %v: the duplicate seq 1 was applied", s.X)
		}
		if got := testutil.ToFloat64(h.loop.Metrics.Commands.WithLabelValues(tickloop.OutcomeDuplicate)); got != 1 {
			t.Fatalf("duplicates counted %v, want 1", got)
		}
	})
	t.Run("DeltaAfterAck", func(t *testing.T) {
		s := c.snapshotWhere("any", func(fakeSnapshot) bool { return true })
		c.send(`{"v":1,"kind":"ack","tick":` + jsonNum(s.Tick) + `}`)
		d := c.snapshotWhere("a delta", func(d fakeSnapshot) bool { return !d.Full })
		if d.Base != s.Tick || d.Tick <= s.Tick {
			t.Fatalf("delta %+v after acking %d", d, s.Tick)
		}
		m := h.loop.Metrics
		waitFor(t, "snapshots counted by mode", func() bool {
			return testutil.ToFloat64(m.Snapshots.WithLabelValues("full")) >= 1 && testutil.ToFloat64(m.Snapshots.WithLabelValues("delta")) >= 1
		})
		for _, mode := range []string{"full", "delta"} {
			frames, bytes := testutil.ToFloat64(m.Snapshots.WithLabelValues(mode)), testutil.ToFloat64(m.SnapshotBytes.WithLabelValues(mode))
			if bytes < frames {
				t.Fatalf("%s: %v frames counted with %v bytes", mode, frames, bytes)
			}
		}
	})
	t.Run("AckOtherCommands", func(t *testing.T) {
		c.send(`{"v":1,"kind":"command","seq":3,"feature":"test","action":"other"}`)
		if m := c.next(); m["kind"] != "ack" || m["seq"] != float64(3) {
			t.Fatalf("got %v, want ack 3", m)
		}
	})
	t.Run("ErrorsKeepConnection", func(t *testing.T) {
		for _, tc := range []struct{ msg, code string }{
			{`{"v":1,"kind":"command","seq":4,"feature":"movement","action":"input_batch","payload":{"inputs":"up"}}`, "bad_request"},
			{`{"v":1,"kind":"command","seq":5,"feature":"dance","action":"now"}`, "not_implemented"},
			{`{"v":1,"kind":"command","seq":6,"feature":"test","action":"reject"}`, "conflict"},
			{`{"v":1,"kind":"command","feature":"test","action":"other"}`, "bad_request"},
			{`{not json`, "bad_request"},
			{`{"v":2,"kind":"ping"}`, "bad_request"},
			{`{"v":1,"kind":"hello","ticket":"char-2"}`, "bad_request"},
			{`{"v":1,"kind":"ack"}`, "bad_request"},
		} {
			c.send(tc.msg)
			if m := c.next(); m["kind"] != "error" || m["code"] != tc.code {
				t.Fatalf("%s: got %v, want error %s", tc.msg, m, tc.code)
			}
		}
		c.send(`{"v":1,"kind":"ping","t":7}`)
		if m := c.next(); m["kind"] != "pong" || m["t"] != float64(7) {
			t.Fatalf("got %v, want pong 7", m)
		}
	})
}

func jsonNum(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestResume_OnceWithinTTL(t *testing.T) {
	h := newHarness(t, func(h *harness, _ *ws.Server) { h.loop.ResumeTTL = 300 * time.Millisecond })
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	token := c.welcome()["resumeToken"].(string)
	c.send(`{"v":1,"kind":"command","seq":1,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":1,"dx":7}]}}`)
	c.snapshotWhere("the move", func(s fakeSnapshot) bool { return s.X == 107 })
	c.c.Close()

	r := h.dial(t, `{"v":1,"kind":"hello","resume":"`+token+`"}`)
	w := r.welcome()
	if w["resumed"] != true || w["characterId"] != "char-1" || w["resumeToken"] == token {
		t.Fatalf("resumed welcome %v", w)
	}
	if s := r.snapshotWhere("full", func(s fakeSnapshot) bool { return s.Full }); s.X != 107 {
		t.Fatalf("resumed at x %v, want 107", s.X)
	}
	// The seq carries on from the session before.
	r.send(`{"v":1,"kind":"command","seq":1,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":2,"dx":1}]}}`)
	r.send(`{"v":1,"kind":"command","seq":2,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":3,"dx":1}]}}`)
	if s := r.snapshotWhere("input 3", func(s fakeSnapshot) bool { return s.Ack == 3 }); s.X != 108 {
		t.Fatalf("x %v after a replayed seq and one new input", s.X)
	}

	t.Run("ErrUsedTwice", func(t *testing.T) {
		again := h.dial(t, `{"v":1,"kind":"hello","resume":"`+token+`"}`)
		if m := again.next(); m["code"] != "ticket_invalid" {
			t.Fatalf("second resume: %v", m)
		}
		again.wantClose(websocket.ClosePolicyViolation)
	})
	t.Run("ErrAfterTTL", func(t *testing.T) {
		next := w["resumeToken"].(string)
		r.c.Close()
		waitFor(t, "the character's release", func() bool { return h.loop.Players() == 0 })
		if got := h.orch.Pushed(); len(got) == 0 || got[len(got)-1] != "char-1" {
			t.Fatalf("pushes %v, want the released character's final state", got)
		}
		late := h.dial(t, `{"v":1,"kind":"hello","resume":"`+next+`"}`)
		if m := late.next(); m["code"] != "ticket_invalid" {
			t.Fatalf("resume after the TTL: %v", m)
		}
		late.wantClose(websocket.ClosePolicyViolation)
	})
}

// TestSlowClient_DroppedTickGoesOn checks that a client that stops reading is dropped
// while the tick keeps advancing and another client keeps getting snapshots.
func TestSlowClient_DroppedTickGoesOn(t *testing.T) {
	h := newHarness(t, func(h *harness, s *ws.Server) {
		s.SendQueue = 4
		h.game.padFor, h.game.padBytes = "char-1", 256<<10
	})
	slow, _, err := websocket.DefaultDialer.Dial(h.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if err := slow.WriteMessage(websocket.TextMessage, []byte(`{"v":1,"kind":"hello","ticket":"char-1"}`)); err != nil {
		t.Fatal(err)
	}
	// The slow client never reads; its snapshots are fat, so the socket buffers fill
	// and then its queue.
	fast := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-2"}`)
	fast.welcome()
	start := h.loop.Tick()
	waitWithin(t, 30*time.Second, "the slow client's drop", func() bool {
		return testutil.ToFloat64(h.loop.Metrics.Dropped) >= 1
	})
	fast.snapshotWhere("a snapshot after the drop", func(fakeSnapshot) bool { return true })
	waitFor(t, "ticks to advance", func() bool { return h.loop.Tick() > start+30 })
}

func TestPortal_Transfer(t *testing.T) {
	h := newHarness(t, nil)
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	c.welcome()
	c.send(`{"v":1,"kind":"command","seq":1,"feature":"test","action":"portal"}`)
	if m := c.next(); m["kind"] != "ack" {
		t.Fatalf("got %v, want ack", m)
	}
	m := c.next()
	if m["kind"] != "transfer" || m["token"] != "tok" || m["ws"] != "/maps/frontier-1/ws" || m["toInstanceId"] != "frontier-1" {
		t.Fatalf("got %v, want transfer", m)
	}
	c.wantClose(websocket.CloseNormalClosure)
	waitFor(t, "the character to leave", func() bool { return h.loop.Players() == 0 })
	h.orch.mu.Lock()
	req := h.orch.requests[0]
	h.orch.mu.Unlock()
	if req.CharacterID != "char-1" || req.ToMapID != "frontier" || req.FromInstanceID != "forest-1" || req.Epoch != 2 || req.State.X != 100 {
		t.Fatalf("transfer request %+v", req)
	}
}

func TestPortal_DeniedStays(t *testing.T) {
	h := newHarness(t, nil)
	h.orch.deny = apierr.EMAPQUARANTINED
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	c.welcome()
	c.send(`{"v":1,"kind":"command","seq":1,"feature":"test","action":"portal"}`)
	c.next() // ack
	if m := c.next(); m["kind"] != "event" || m["name"] != "transfer_denied" || m["code"] != "map_quarantined" {
		t.Fatalf("got %v, want transfer_denied event", m)
	}
	c.send(`{"v":1,"kind":"command","seq":2,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":1,"dx":1}]}}`)
	c.snapshotWhere("the character moving on", func(s fakeSnapshot) bool { return s.X == 101 })
	if h.loop.Players() != 1 {
		t.Fatal("the denied character left")
	}
}

func TestTransferArrival_Reported(t *testing.T) {
	h := newHarness(t, nil)
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"tr-char-5"}`)
	w := c.welcome()
	if w["transferId"] != "tr-char-5" || w["characterId"] != "char-5" {
		t.Fatalf("welcome %v", w)
	}
	if s := c.snapshotWhere("full", func(s fakeSnapshot) bool { return s.Full }); s.X != 42 {
		t.Fatalf("arrived at x %v, want the carried 42", s.X)
	}
	var reports []mapcontract.TransferResult
	waitFor(t, "the arrival's report", func() bool {
		h.orch.mu.Lock()
		defer h.orch.mu.Unlock()
		reports = append(reports[:0], h.orch.reports...)
		return len(reports) > 0
	})
	if len(reports) != 1 || !reports[0].Success || reports[0].InstanceID != "forest-1" || reports[0].TransferID != "tr-char-5" {
		t.Fatalf("reports %+v", reports)
	}
}

func TestClose_GoingAwayAndPush(t *testing.T) {
	h := newHarness(t, nil)
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	c.welcome()
	if err := h.loop.Close(); err != nil {
		t.Fatal(err)
	}
	c.wantClose(websocket.CloseGoingAway)
	if got := h.orch.Pushed(); len(got) != 1 || got[0] != "char-1" {
		t.Fatalf("pushes %v, want char-1's final state", got)
	}
	late := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-2"}`)
	if m := late.next(); m["code"] != "map_unavailable" {
		t.Fatalf("join after close: %v", m)
	}
	late.wantClose(websocket.CloseTryAgainLater)
}

// TestCatchUp_Bounded stalls one step for ten periods: the next wake-up runs at most
// MaxCatchUp steps at once, gives the rest up, and counts the overrun.
func TestCatchUp_Bounded(t *testing.T) {
	h := newHarness(t, func(h *harness, _ *ws.Server) {
		h.loop.MaxCatchUp = 3
		h.game.stallAt, h.game.stallFor = 10, 330*time.Millisecond
	})
	waitFor(t, "steps after the stall", func() bool { return h.loop.Tick() > 40 })
	steps := h.game.Steps()
	burst, longest := 1, 1
	for i := 1; i < len(steps); i++ {
		if steps[i].Sub(steps[i-1]) < 2*time.Millisecond {
			burst++
		} else {
			burst = 1
		}
		longest = max(longest, burst)
	}
	if longest > 3 {
		t.Fatalf("%d steps ran back to back, want at most 3", longest)
	}
	if testutil.ToFloat64(h.loop.Metrics.Overruns) < 1 || testutil.ToFloat64(h.loop.Metrics.SkippedTicks) < 5 {
		t.Fatalf("overruns %v, skipped %v", testutil.ToFloat64(h.loop.Metrics.Overruns), testutil.ToFloat64(h.loop.Metrics.SkippedTicks))
	}
}

func TestPeriodicPush(t *testing.T) {
	h := newHarness(t, nil)
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	c.welcome()
	h.orch.mu.Lock()
	h.orch.pushDue = true
	h.orch.mu.Unlock()
	waitFor(t, "a periodic push", func() bool { return len(h.orch.Pushed()) == 1 })
	h.orch.mu.Lock()
	defer h.orch.mu.Unlock()
	if len(h.orch.instancePushes) != 1 || h.orch.instancePushes[0] != outbox.InstancePartition {
		t.Fatalf("instance pushes %v", h.orch.instancePushes)
	}
	if p := h.orch.pushes[0]; p.X != 100 || p.MapID != mapgen.DefaultMapID || p.InstanceID != "forest-1" {
		t.Fatalf("push %+v", p)
	}
}

// TestPortal_FrozenWhileInFlight: a character that entered a portal stands still,
// whatever its client sends, until the orchestrator answers; denied, it walks again.
func TestPortal_FrozenWhileInFlight(t *testing.T) {
	h := newHarness(t, nil)
	h.orch.deny, h.orch.hold = apierr.EMAPUNAVAILABLE, make(chan struct{})
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	c.welcome()
	c.send(`{"v":1,"kind":"command","seq":1,"feature":"test","action":"portal"}`)
	c.next() // ack
	waitFor(t, "the transfer request", func() bool {
		h.orch.mu.Lock()
		defer h.orch.mu.Unlock()
		return len(h.orch.requests) == 1
	})
	c.send(`{"v":1,"kind":"command","seq":2,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":1,"dx":5}]}}`)
	c.send(`{"v":1,"kind":"ack","tick":1}`)
	s := c.snapshotWhere("a snapshot after the input", func(s fakeSnapshot) bool { return s.Tick > 0 })
	waitFor(t, "ticks to pass", func() bool { return h.loop.Tick() > s.Tick+10 })
	if s := c.snapshotWhere("a later snapshot", func(fakeSnapshot) bool { return true }); s.X != 100 {
		t.Fatalf("x %v: the character walked while its transfer was in flight", s.X)
	}
	close(h.orch.hold)
	if m := c.next(); m["kind"] != "event" || m["name"] != "transfer_denied" {
		t.Fatalf("got %v, want transfer_denied", m)
	}
	c.send(`{"v":1,"kind":"command","seq":3,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":2,"dx":1}]}}`)
	c.snapshotWhere("the character walking again", func(s fakeSnapshot) bool { return s.X == 101 })
}

// TestTakeover_ReplacedAndFreshSeq: a second join of a connected character (a second
// tab) tells the first connection "replaced" and closes it with 4000; the new one walks
// from input seq 1 at once although the old session was far past it.
func TestTakeover_ReplacedAndFreshSeq(t *testing.T) {
	h := newHarness(t, nil)
	first := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	first.welcome()
	first.send(`{"v":1,"kind":"command","seq":40,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":50,"dx":3}]}}`)
	first.snapshotWhere("input 50", func(s fakeSnapshot) bool { return s.Ack == 50 })

	second := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1#2"}`)
	second.welcome()
	if m := first.next(); m["kind"] != "error" || m["code"] != "replaced" {
		t.Fatalf("old connection got %v, want error replaced", m)
	}
	first.wantClose(mapserver.CloseReplaced)
	second.send(`{"v":1,"kind":"command","seq":1,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":1,"dx":1}]}}`)
	if s := second.snapshotWhere("input 1 of the new session", func(s fakeSnapshot) bool { return s.Ack == 1 }); s.X != 104 {
		t.Fatalf("x %v, want 104 (103 + the new session's first input)", s.X)
	}
}

// TestSnapshots_QueuedFramesIntact: the tick encodes a round's frames into one arena
// and queues them without a copy, so no later round may write where a queued frame
// lies. With the writes held for twelve rounds, every frame queued meanwhile still
// reaches the client as it was encoded, in order.
func TestSnapshots_QueuedFramesIntact(t *testing.T) {
	var srv *ws.Server
	h := newHarness(t, func(_ *harness, s *ws.Server) { srv = s })
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	c.welcome()
	last := c.snapshotWhere("a first snapshot", func(fakeSnapshot) bool { return true }).Tick

	srv.HoldWrites()
	start := h.loop.Tick()
	waitFor(t, "twelve snapshot rounds", func() bool { return h.loop.Tick() >= start+24 })
	srv.ReleaseWrites()

	var got int
	for last < start+24 {
		s := c.snapshotWhere("the rounds held back", func(fakeSnapshot) bool { return true })
		if s.Tick <= last {
			t.Fatalf("snapshot of tick %d after tick %d: a queued frame was written over", s.Tick, last)
		}
		last = s.Tick
		got++
	}
	if got < 10 {
		t.Fatalf("%d snapshots for 24 ticks", got)
	}
	if n := c.bad.Load(); n != 0 {
		t.Fatalf("%d binary frames were not snapshots: a queued frame was written over", n)
	}
}

// TestSnapshots_StaggeredByPlayer: at 15 snapshots a second of 30 ticks, two players
// have their snapshots built at alternate ticks, each one every second tick, not both at
// every second tick (a late wake-up that runs two steps at once may build both).
func TestSnapshots_StaggeredByPlayer(t *testing.T) {
	h := newHarness(t, nil)
	a := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	a.welcome()
	b := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-2"}`)
	b.welcome()
	start := h.loop.Tick() + 2
	ticks := func(c *client) map[uint64]bool {
		got := map[uint64]bool{}
		prev := uint64(0)
		for len(got) < 12 {
			s := c.snapshotWhere("a snapshot after both joined", func(s fakeSnapshot) bool { return s.Tick > start })
			if prev != 0 && s.Tick-prev < 2 {
				t.Fatalf("snapshots of ticks %d and %d: one a tick, want one every second tick", prev, s.Tick)
			}
			got[s.Tick], prev = true, s.Tick
		}
		return got
	}
	ta, tb := ticks(a), ticks(b)
	both := 0
	for tk := range ta {
		if tb[tk] {
			both++
		}
	}
	if both > 2 {
		t.Fatalf("%d of 12 snapshot ticks were both players', want them on alternate ticks", both)
	}
}
