package tickloop_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/ws"
)

// movingEvent is the event a handed-over player is sent before its connection moves.
const movingEvent = `{"v":1,"kind":"event","name":"moving","data":{"reason":"upgrade"}}`

// movePeer is a connection that can move, as a link's stream of an edge that reads
// moves: it keeps the text frames sent to it, the last snapshot, its move and its close.
type movePeer struct {
	mu     sync.Mutex
	texts  []string
	last   fakeSnapshot
	moved  []string // generation, hello
	closed int
}

var _ mapserver.Peer = (*movePeer)(nil)

func (p *movePeer) Send(frame []byte, binary bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.moved != nil || p.closed != 0 {
		return true // after the end, frames are discarded
	}
	if binary {
		_ = json.Unmarshal(frame, &p.last)
		return true
	}
	p.texts = append(p.texts, string(frame))
	return true
}

func (p *movePeer) Reply(frame []byte) bool { return p.Send(frame, false) }

func (p *movePeer) Close(code int, _ string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed == 0 && p.moved == nil {
		p.closed = code
	}
}

func (p *movePeer) Move(generation string, hello []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.moved != nil || p.closed != 0 {
		return false
	}
	p.moved = []string{generation, string(hello)}
	return true
}

func (p *movePeer) Remote() string { return "192.0.2.1" }

func (p *movePeer) state() (texts []string, last fakeSnapshot, moved []string, closed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.texts), p.last, p.moved, p.closed
}

// join admits a movePeer with hello and waits for its welcome.
func (h *harness) join(t *testing.T, hello string) (*movePeer, mapserver.Session) {
	t.Helper()
	p := &movePeer{}
	sess := h.loop.Hello(context.Background(), []byte(hello), false, p)
	if sess == nil {
		texts, _, _, _ := p.state()
		t.Fatalf("hello %s refused: %v", hello, texts)
	}
	return p, sess
}

// handoff calls the loop's Handoff to gen-2 within d.
func (h *harness) handoff(t *testing.T, d time.Duration) mapcontract.HandoffAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	a, err := h.loop.Handoff(ctx, mapcontract.Handoff{Generation: "gen-2"})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// requests returns the transfer requests the map made.
func (f *fakeOrch) transferRequests() []mapcontract.TransferRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// TestHandoff_MovesEveryPlayer: a handoff of three connected players requests three
// handoff transfers to the map's own instance with each one's state at the cut, sends
// each the moving event and then moves its connection with a hello carrying the token
// and the formats of its own hello, closes none, and leaves no one; a hello or a
// resume after it is refused map_unavailable (1013) without redeeming anything.
func TestHandoff_MovesEveryPlayer(t *testing.T) {
	h := newHarness(t, nil)
	hellos := map[string]string{
		"char-1": `{"v":1,"kind":"hello","ticket":"char-1","formats":[2,3]}`,
		"char-2": `{"v":1,"kind":"hello","ticket":"char-2","formats":[2]}`,
		"char-3": `{"v":1,"kind":"hello","ticket":"char-3"}`,
	}
	wantHello := map[string]string{
		"char-1": `{"v":1,"kind":"hello","ticket":"tok","formats":[2,3]}`,
		"char-2": `{"v":1,"kind":"hello","ticket":"tok","formats":[2]}`,
		"char-3": `{"v":1,"kind":"hello","ticket":"tok"}`,
	}
	peers := map[string]*movePeer{}
	var resume string
	for id, hello := range hellos {
		p, sess := h.join(t, hello)
		peers[id] = p
		if id == "char-2" {
			sess.Receive([]byte(`{"v":1,"kind":"command","seq":1,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":1,"dx":5}]}}`), false)
		}
		waitFor(t, id+"'s welcome", func() bool { texts, _, _, _ := p.state(); return len(texts) > 0 })
		texts, _, _, _ := p.state()
		var w map[string]any
		_ = json.Unmarshal([]byte(texts[0]), &w)
		resume, _ = w["resumeToken"].(string)
	}
	waitFor(t, "char-2 to move", func() bool { _, s, _, _ := peers["char-2"].state(); return s.X == 105 })

	if a := h.handoff(t, 5*time.Second); a != (mapcontract.HandoffAnswer{Moved: 3}) {
		t.Fatalf("answer %+v, want 3 moved", a)
	}
	reqs := h.orch.transferRequests()
	if len(reqs) != 3 {
		t.Fatalf("%d transfer requests, want 3", len(reqs))
	}
	for _, r := range reqs {
		wantX := 100.0
		if r.CharacterID == "char-2" {
			wantX = 105
		}
		if !r.Handoff || r.FromInstanceID != "forest-1" || r.ToInstanceID != "forest-1" || r.ToMapID != "" || r.Epoch != 2 ||
			r.TransferID == "" || r.State.X != wantX || r.State.CharacterID != r.CharacterID || r.State.InstanceID != "forest-1" {
			t.Fatalf("transfer request %+v, want a handoff to forest-1 at epoch 2 and x %v", r, wantX)
		}
	}
	if reqs[0].TransferID == reqs[1].TransferID {
		t.Fatal("two requests share a transfer id")
	}
	for id, p := range peers {
		texts, _, moved, closed := p.state()
		if closed != 0 {
			t.Fatalf("%s closed with %d", id, closed)
		}
		if texts[len(texts)-1] != movingEvent {
			t.Fatalf("%s's last message %s, want the moving event", id, texts[len(texts)-1])
		}
		if len(moved) != 2 || moved[0] != "gen-2" || moved[1] != wantHello[id] {
			t.Fatalf("%s moved %q, want gen-2 with %s", id, moved, wantHello[id])
		}
		if ps := h.game.Presences(id); !slices.Contains(ps, gameapi.Held) || slices.Contains(ps, gameapi.Freed) {
			t.Fatalf("%s's presences %v, want held and never freed", id, ps)
		}
	}
	if h.loop.Players() != 0 {
		t.Fatalf("%d players left", h.loop.Players())
	}

	for name, hello := range map[string]string{
		"ErrJoin":   `{"v":1,"kind":"hello","ticket":"char-9"}`,
		"ErrResume": `{"v":1,"kind":"hello","resume":"` + resume + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			c := h.dial(t, hello)
			if m := c.next(); m["kind"] != "error" || m["code"] != apierr.EMAPUNAVAILABLE {
				t.Fatalf("got %v, want map_unavailable", m)
			}
			c.wantClose(websocket.CloseTryAgainLater)
		})
	}
	h.orch.mu.Lock()
	defer h.orch.mu.Unlock()
	if h.orch.used["char-9"] {
		t.Fatal("a hello refused during the handoff used its ticket")
	}
}

// TestHandoff_TransferMessageWhereTheConnectionCannotMove: a player on a WebSocket of
// its own is sent the moving event, then the transfer message with the handoff's
// token, and its connection is closed normally.
func TestHandoff_TransferMessageWhereTheConnectionCannotMove(t *testing.T) {
	h := newHarness(t, nil)
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	c.welcome()
	if a := h.handoff(t, 5*time.Second); a != (mapcontract.HandoffAnswer{Transferred: 1}) {
		t.Fatalf("answer %+v, want 1 transferred", a)
	}
	if m := c.next(); m["kind"] != "event" || m["name"] != "moving" {
		t.Fatalf("got %v, want the moving event", m)
	}
	if m := c.next(); m["kind"] != "transfer" || m["token"] != "tok" {
		t.Fatalf("got %v, want the transfer message", m)
	}
	c.wantClose(websocket.CloseNormalClosure)
	if h.loop.Players() != 0 {
		t.Fatalf("%d players left", h.loop.Players())
	}
}

// TestHandoff_RefusedStaysAndIsRetried: a refused handoff transfer leaves the player
// playing here, counted as remaining; a call again with the same generation hands it
// over, the answer counting since the first call.
func TestHandoff_RefusedStaysAndIsRetried(t *testing.T) {
	h := newHarness(t, nil)
	h.orch.deny = apierr.EMAPUNAVAILABLE
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	c.welcome()
	if a := h.handoff(t, 5*time.Second); a != (mapcontract.HandoffAnswer{Remaining: 1}) {
		t.Fatalf("answer %+v, want 1 remaining", a)
	}
	if ps := h.game.Presences("char-1"); !slices.Equal(ps, []gameapi.Presence{gameapi.Held, gameapi.Freed}) {
		t.Fatalf("presences %v, want held then freed", ps)
	}
	c.send(`{"v":1,"kind":"command","seq":1,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":1,"dx":1}]}}`)
	c.snapshotWhere("the character moving on", func(s fakeSnapshot) bool { return s.X == 101 })

	h.orch.mu.Lock()
	h.orch.deny = ""
	h.orch.mu.Unlock()
	if a := h.handoff(t, 5*time.Second); a != (mapcontract.HandoffAnswer{Transferred: 1}) {
		t.Fatalf("second answer %+v, want 1 transferred", a)
	}
	if reqs := h.orch.transferRequests(); len(reqs) != 2 || reqs[1].State.X != 101 || reqs[0].TransferID == reqs[1].TransferID {
		t.Fatalf("requests %+v, want a fresh one with the state it moved to", reqs)
	}
}

// TestHandoff_SettlesCriticalEventsFirst: a critical event pending when the handoff is
// called is answered before the cut: no transfer is requested while it waits, and the
// player gets the command's ack and the game's outcome before the moving event.
func TestHandoff_SettlesCriticalEventsFirst(t *testing.T) {
	h := newHarness(t, nil)
	hold := make(chan struct{})
	h.orch.holdCritical = hold
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	c.welcome()
	c.send(`{"v":1,"kind":"command","seq":1,"feature":"test","action":"pickup","payload":{}}`)
	waitFor(t, "the event to be sent", func() bool { return len(h.orch.sentEvents()) == 1 })

	answer := make(chan mapcontract.HandoffAnswer, 1)
	go func() {
		a, _ := h.loop.Handoff(context.Background(), mapcontract.Handoff{Generation: "gen-2"})
		answer <- a
	}()
	waitFor(t, "the character to be held", func() bool { return slices.Contains(h.game.Presences("char-1"), gameapi.Held) })
	start := h.loop.Tick()
	waitFor(t, "ticks to pass", func() bool { return h.loop.Tick() > start+5 })
	if n := len(h.orch.transferRequests()); n != 0 {
		t.Fatalf("%d transfers requested while a critical event was pending", n)
	}
	close(hold)
	if a := <-answer; a != (mapcontract.HandoffAnswer{Transferred: 1}) {
		t.Fatalf("answer %+v, want 1 transferred", a)
	}
	for _, want := range []string{"ack", "settled", "moving", "transfer"} {
		m := c.next()
		if got := m["kind"]; got != want && m["name"] != want {
			t.Fatalf("got %v, want %s", m, want)
		}
	}
}

// TestHandoff_OutOfTime: a call whose context ends before the cut is answered with
// every character remaining, and the characters held for the cut play on; one that
// ends while the transfers are in flight is answered the same, and a call again
// answers once they are.
func TestHandoff_OutOfTime(t *testing.T) {
	t.Run("BeforeTheCut", func(t *testing.T) {
		h := newHarness(t, nil)
		hold := make(chan struct{})
		defer close(hold)
		h.orch.holdCritical = hold
		c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
		c.welcome()
		c.send(`{"v":1,"kind":"command","seq":1,"feature":"test","action":"pickup","payload":{}}`)
		waitFor(t, "the event to be sent", func() bool { return len(h.orch.sentEvents()) == 1 })
		if a := h.handoff(t, 200*time.Millisecond); a != (mapcontract.HandoffAnswer{Remaining: 1}) {
			t.Fatalf("answer %+v, want 1 remaining", a)
		}
		if ps := h.game.Presences("char-1"); !slices.Equal(ps, []gameapi.Presence{gameapi.Held, gameapi.Freed}) {
			t.Fatalf("presences %v, want held then freed", ps)
		}
		if n := len(h.orch.transferRequests()); n != 0 {
			t.Fatalf("%d transfers requested", n)
		}
	})
	t.Run("InFlight", func(t *testing.T) {
		h := newHarness(t, nil)
		hold := make(chan struct{})
		h.orch.hold = hold
		p, _ := h.join(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
		if a := h.handoff(t, 200*time.Millisecond); a != (mapcontract.HandoffAnswer{Remaining: 1}) {
			t.Fatalf("answer %+v, want 1 remaining", a)
		}
		close(hold)
		if a := h.handoff(t, 5*time.Second); a != (mapcontract.HandoffAnswer{Moved: 1}) {
			t.Fatalf("second answer %+v, want 1 moved", a)
		}
		if n := len(h.orch.transferRequests()); n != 1 {
			t.Fatalf("%d transfers requested, want the one in flight alone", n)
		}
		if _, _, moved, _ := p.state(); moved == nil {
			t.Fatal("the player's connection did not move")
		}
	})
}

// TestHandoff_WithoutConnection: a character whose client awaits a resume is handed
// over too, its transfer carrying its state, and counted as transferred.
func TestHandoff_WithoutConnection(t *testing.T) {
	h := newHarness(t, nil)
	_, sess := h.join(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	sess.Closed()
	waitFor(t, "the character to await its resume", func() bool {
		return slices.Contains(h.game.Presences("char-1"), gameapi.Away)
	})
	if a := h.handoff(t, 5*time.Second); a != (mapcontract.HandoffAnswer{Transferred: 1}) {
		t.Fatalf("answer %+v, want 1 transferred", a)
	}
	if reqs := h.orch.transferRequests(); len(reqs) != 1 || !reqs[0].Handoff || reqs[0].State.X != 100 {
		t.Fatalf("requests %+v", reqs)
	}
	if h.loop.Players() != 0 {
		t.Fatalf("%d players left", h.loop.Players())
	}
}

// TestHandoff_CutDelay: with HandoffCutDelay (MAP_FAULT_HANDOFF_DELAY_MS) the cut waits
// that long after each call, its characters held and no transfer requested meanwhile
// (a call that ends sooner leaves them playing); once the delay is over they are
// handed over.
func TestHandoff_CutDelay(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := newHarness(t, func(h *harness, _ *ws.Server) {
		h.loop.Now, h.loop.HandoffCutDelay = clock, time.Minute
	})
	p, _ := h.join(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	if a := h.handoff(t, 200*time.Millisecond); a != (mapcontract.HandoffAnswer{Remaining: 1}) {
		t.Fatalf("answer within the delay %+v, want 1 remaining", a)
	}
	if n := len(h.orch.transferRequests()); n != 0 {
		t.Fatalf("%d transfers requested within the delay", n)
	}
	answer := make(chan mapcontract.HandoffAnswer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a, _ := h.loop.Handoff(ctx, mapcontract.Handoff{Generation: "gen-2"})
		answer <- a
	}()
	waitFor(t, "the character held again", func() bool { return len(h.game.Presences("char-1")) == 3 })
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if a := <-answer; a != (mapcontract.HandoffAnswer{Moved: 1}) {
		t.Fatalf("answer after the delay %+v, want 1 moved", a)
	}
	if _, _, moved, _ := p.state(); moved == nil {
		t.Fatal("the player's connection did not move")
	}
}
