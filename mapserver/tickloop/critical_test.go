package tickloop_test

import (
	"errors"
	"testing"

	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/ws"
)

// pickupCmd ("test/pickup") is a critical command of the actor alone; Refuse, when set,
// is the refusal the game answers it with before anything is sent.
type pickupCmd struct {
	Refuse string `json:"refuse"`
}

// giveCmd ("test/give") is a critical command that gives an item to another character.
type giveCmd struct {
	To string `json:"to"`
}

// critical answers a critical command: the event to make durable, naming the
// characters it involves with no epoch (the kit's to fill in).
func (g *fakeGame) critical(id string, cmd any) gameapi.Reply {
	ev := &record.CriticalEvent{EventID: gameapi.NewEventID(), InstanceID: "forest-1", Kind: string(items.KindPickup),
		Payload: []byte(`{}`), Epochs: map[string]int64{id: 0}}
	switch c := cmd.(type) {
	case pickupCmd:
		if c.Refuse != "" {
			return gameapi.Reply{Err: apierr.Errorf(c.Refuse, "That item is no longer where it was.")}
		}
	case giveCmd:
		ev.Kind, ev.Epochs[c.To] = string(items.KindTrade), 0
	}
	return gameapi.Reply{Critical: ev}
}

// Settle keeps the answer and returns it, with its code, as the refusal; a durable
// event shows "settled" to the actor after the ack.
func (g *fakeGame) Settle(eventID string, answer error, out gameapi.Out) error {
	g.mu.Lock()
	g.settled[eventID] = answer
	g.mu.Unlock()
	if answer != nil {
		return apierr.Errorf(apierr.Code(answer), "Refused.")
	}
	out.Notify([]byte(`{"v":1,"kind":"event","name":"settled"}`), []string{"char-1"})
	return nil
}

// Settled returns the answer Settle was given for eventID.
func (g *fakeGame) Settled(eventID string) (answer error, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	answer, ok = g.settled[eventID]
	return answer, ok
}

// Critical records ev and answers it with the durable ack, or with refuse when set.
func (f *fakeOrch) Critical(ev record.CriticalEvent, done func(record.CriticalAck, error)) error {
	f.mu.Lock()
	f.criticals = append(f.criticals, ev)
	refuse, hold := f.refuse, f.holdCritical
	f.mu.Unlock()
	go func() {
		if hold != nil {
			<-hold
		}
		if refuse != nil {
			done(record.CriticalAck{}, refuse)
			return
		}
		done(record.CriticalAck{EventID: ev.EventID, Seq: 1}, nil)
	}()
	return nil
}

func (f *fakeOrch) Away() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.away
}

// sentEvents returns the critical events the map sent the orchestrator.
func (f *fakeOrch) sentEvents() []record.CriticalEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]record.CriticalEvent(nil), f.criticals...)
}

// TestCritical_AckAfterDurable: a command that needs a critical event is answered only
// once the orchestrator made the event durable: the ack, then what the game shows of
// the outcome. The kit fills in the lease epoch of every character the event names.
func TestCritical_AckAfterDurable(t *testing.T) {
	h := newHarness(t, nil)
	a := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	a.welcome()
	b := h.dial(t, `{"v":1,"kind":"hello","ticket":"tr-char-2"}`)
	b.welcome()

	a.send(`{"v":1,"kind":"command","seq":1,"feature":"test","action":"pickup","payload":{}}`)
	if m := a.next(); m["kind"] != "ack" || m["seq"] != float64(1) {
		t.Fatalf("got %v, want the ack of 1", m)
	}
	if m := a.next(); m["name"] != "settled" {
		t.Fatalf("got %v, want the game's event after the ack", m)
	}
	a.send(`{"v":1,"kind":"command","seq":2,"feature":"test","action":"give","payload":{"to":"char-2"}}`)
	if m := a.next(); m["kind"] != "ack" || m["seq"] != float64(2) {
		t.Fatalf("got %v, want the ack of 2", m)
	}
	evs := h.orch.sentEvents()
	if len(evs) != 2 || evs[0].Epochs["char-1"] != 2 || evs[1].Epochs["char-1"] != 2 || evs[1].Epochs["char-2"] != 9 {
		t.Fatalf("events sent %+v, want the epochs filled in (char-1 at 2, char-2 at 9)", evs)
	}
	if err, ok := h.game.Settled(evs[1].EventID); !ok || err != nil {
		t.Fatalf("the game settled %v %v, want the durable ack", ok, err)
	}
}

// TestCritical_Refusals: whatever refuses an event, the game hears it through Settle
// and what it returns answers the command: its own refusal before anything is sent; the
// orchestrator's refusal as it came; map_unavailable for an orchestrator that could not
// be reached or is away (then nothing is sent); conflict for a character the event
// involves that is not here.
func TestCritical_Refusals(t *testing.T) {
	h := newHarness(t, nil)
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	c.welcome()
	seq := 0
	send := func(action, payload string) float64 {
		seq++
		c.send(`{"v":1,"kind":"command","seq":` + jsonNum(uint64(seq)) + `,"feature":"test","action":"` + action + `","payload":` + payload + `}`)
		return float64(seq)
	}
	want := func(seq float64, code string) {
		t.Helper()
		if m := c.next(); m["kind"] != "error" || m["seq"] != seq || m["code"] != code {
			t.Fatalf("got %v, want the refusal %s of command %v", m, code, seq)
		}
	}
	setOrch := func(refuse error, away bool) {
		h.orch.mu.Lock()
		h.orch.refuse, h.orch.away = refuse, away
		h.orch.mu.Unlock()
	}
	t.Run("ErrByTheGame", func(t *testing.T) {
		n := len(h.orch.sentEvents())
		want(send("pickup", `{"refuse":"item_wrong_place"}`), items.CodeWrongPlace)
		if len(h.orch.sentEvents()) != n {
			t.Fatal("an event the game refused was sent")
		}
	})
	t.Run("ErrByTheOrchestrator", func(t *testing.T) {
		setOrch(apierr.Errorf(items.CodeWrongPlace, `item "x" is elsewhere`), false)
		want(send("pickup", `{}`), items.CodeWrongPlace)
		evs := h.orch.sentEvents()
		if err, _ := h.game.Settled(evs[len(evs)-1].EventID); apierr.Code(err) != items.CodeWrongPlace {
			t.Fatalf("the game was told %v", err)
		}
	})
	t.Run("ErrUnreachable", func(t *testing.T) {
		setOrch(errors.New("dial tcp: connection refused"), false)
		want(send("pickup", `{}`), apierr.EMAPUNAVAILABLE)
	})
	t.Run("ErrAway", func(t *testing.T) {
		setOrch(nil, true)
		n := len(h.orch.sentEvents())
		want(send("pickup", `{}`), apierr.EMAPUNAVAILABLE)
		if len(h.orch.sentEvents()) != n {
			t.Fatal("an event was sent while the orchestrator was away")
		}
		setOrch(nil, false)
	})
	t.Run("ErrPartyAbsent", func(t *testing.T) {
		n := len(h.orch.sentEvents())
		want(send("give", `{"to":"char-9"}`), apierr.ECONFLICT)
		if len(h.orch.sentEvents()) != n {
			t.Fatal("an event involving an absent character was sent")
		}
	})
}

// TestCritical_FromStep: an event the game decides on its own in a Step is sent with no
// command waiting for it, and its answer reaches the game's Settle.
func TestCritical_FromStep(t *testing.T) {
	ev := record.CriticalEvent{EventID: gameapi.NewEventID(), InstanceID: "forest-1", Kind: string(items.KindRecover), Payload: []byte(`{}`)}
	h := newHarness(t, func(h *harness, _ *ws.Server) { h.game.criticals = append(h.game.criticals, ev) })
	waitFor(t, "the game's own event to be settled", func() bool {
		err, ok := h.game.Settled(ev.EventID)
		return ok && err == nil
	})
}
