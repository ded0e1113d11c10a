package loop_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/loop"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// pickupCmd ("test/pickup") is a critical command of the actor alone; Refuse, when set,
// is the item rule the game refuses it with before anything is sent.
type pickupCmd struct {
	Refuse string `json:"refuse"`
}

// giveCmd ("test/give") is a critical command that gives an item to another character.
type giveCmd struct {
	To string `json:"to"`
}

var _ loop.Criticals = (*fakeGame)(nil)

func (g *fakeGame) Begin(id string, epoch int64, eventID string, cmd any) (*record.CriticalEvent, bool, error) {
	ev := &record.CriticalEvent{EventID: eventID, InstanceID: "forest-1", Kind: string(items.KindPickup),
		Payload: []byte(`{}`), Epochs: map[string]int64{id: epoch}}
	switch c := cmd.(type) {
	case pickupCmd:
		if c.Refuse != "" {
			return nil, true, apierr.Errorf(c.Refuse, "item %q is at character %q, not at %q", "forest-1.item-3", "char-9", "forest-1")
		}
	case giveCmd:
		ev.Kind, ev.Epochs[c.To] = string(items.KindTrade), 0
	default:
		return nil, false, nil
	}
	return ev, true, nil
}

func (g *fakeGame) Settle(eventID string, answer error) (loop.Event, error) {
	return loop.Event{}, answer
}

// Critical records ev and answers it with the durable ack, or with refuse when set.
func (f *fakeOrch) Critical(ev record.CriticalEvent, done func(record.CriticalAck, error)) error {
	f.mu.Lock()
	f.criticals = append(f.criticals, ev)
	refuse := f.refuse
	f.mu.Unlock()
	if refuse != nil {
		go done(record.CriticalAck{}, refuse)
		return nil
	}
	go done(record.CriticalAck{EventID: ev.EventID, Seq: 1}, nil)
	return nil
}

// sent is the number of critical events the map sent the orchestrator.
func (f *fakeOrch) sent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.criticals)
}

// wantRefusal reads the answer to command seq and checks it is a refusal with code
// whose message is the sentence written for players, naming no id.
func wantRefusal(t *testing.T, c *client, seq float64, code string) {
	t.Helper()
	m := c.next()
	msg, _ := m["message"].(string)
	if m["kind"] != "error" || m["seq"] != seq || m["code"] != code {
		t.Fatalf("got %v, want the refusal %s of command %v", m, code, seq)
	}
	for _, leak := range []string{"char-", "guest-", "forest-1", "not found", `"`} {
		if strings.Contains(msg, leak) {
			t.Fatalf("the player reads %q, which names %q", msg, leak)
		}
	}
	if msg == "" || !strings.HasSuffix(msg, ".") {
		t.Fatalf("the player reads %q, not a sentence", msg)
	}
}

// TestCritical_GuestNoItems: a guest's item event is refused at once with
// guest_no_items and never sent (the orchestrator keeps items for saved characters
// only), and so is a saved character's that would give a guest an item; a saved
// character's own goes through.
func TestCritical_GuestNoItems(t *testing.T) {
	h := newHarness(t, nil)
	guest := h.dial(t, `{"v":1,"kind":"hello","ticket":"guest-1"}`)
	guest.welcome()
	saved := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	saved.welcome()

	guest.send(`{"v":1,"kind":"command","seq":1,"feature":"test","action":"pickup","payload":{}}`)
	wantRefusal(t, guest, 1, wire.CodeGuestNoItems)
	saved.send(`{"v":1,"kind":"command","seq":1,"feature":"test","action":"give","payload":{"to":"guest-1"}}`)
	wantRefusal(t, saved, 1, wire.CodeGuestNoItems)
	if n := h.orch.sent(); n != 0 {
		t.Fatalf("%d critical events sent for a guest", n)
	}
	saved.send(`{"v":1,"kind":"command","seq":2,"feature":"test","action":"pickup","payload":{}}`)
	if m := saved.next(); m["kind"] != "ack" || m["seq"] != float64(2) {
		t.Fatalf("a saved character's pickup: %v", m)
	}
}

// TestCritical_RefusalsForPlayers: whatever refuses an item event, the item rules on
// the map or the orchestrator with its store's words, the player gets a code to act on
// and a sentence that names no character, item or instance.
func TestCritical_RefusalsForPlayers(t *testing.T) {
	h := newHarness(t, nil)
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	c.welcome()
	seq := 0
	pickup := func(payload string) float64 {
		seq++
		c.send(`{"v":1,"kind":"command","seq":` + strconv.Itoa(seq) + `,"feature":"test","action":"pickup","payload":` + payload + `}`)
		return float64(seq)
	}
	t.Run("ItemRuleOnTheMap", func(t *testing.T) {
		wantRefusal(t, c, pickup(`{"refuse":"item_wrong_place"}`), items.CodeWrongPlace)
	})
	for _, tt := range []struct {
		name     string
		answer   error
		wantCode string
	}{
		{"ErrHolderNotSaved", apierr.Errorf(apierr.ENOTFOUND, `character "guest-abc" not found`), wire.CodeGuestNoItems},
		{"ErrItemRule", apierr.Errorf(items.CodeWrongPlace, `item "forest-1.item-3" is at character "char-9", not at instance "forest-1"`), items.CodeWrongPlace},
		{"ErrLease", apierr.Errorf(apierr.ECONFLICT, `character "char-1" is held at epoch 4, not 2`), apierr.ECONFLICT},
		{"ErrMalformed", apierr.Errorf(apierr.EBADREQUEST, `critical event: eventId must be 1 to 128 printable characters`), apierr.EINTERNAL},
		{"ErrStore", apierr.Errorf(apierr.EUNAVAILABLE, `store closing: database "forest-1" is locked`), apierr.EMAPUNAVAILABLE},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h.orch.mu.Lock()
			h.orch.refuse = tt.answer
			h.orch.mu.Unlock()
			wantRefusal(t, c, pickup(`{}`), tt.wantCode)
		})
	}
}
