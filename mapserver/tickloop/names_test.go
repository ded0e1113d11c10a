package tickloop_test

import (
	"reflect"
	"strconv"
	"testing"
)

// TestNames: players see each other by name, not by id: the welcome names the player's
// own character, and a players/names query names the entities asked for that are
// characters here, in the order asked, until they leave.
func TestNames(t *testing.T) {
	h := newHarness(t, nil)
	a := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	if w := a.welcome(); w["name"] != "Name of char-1" {
		t.Fatalf("welcome %v, want the character's name", w)
	}
	b := h.dial(t, `{"v":1,"kind":"hello","ticket":"guest-2"}`)
	b.welcome()
	const aEntity, bEntity = 101, 102 // the first and second spawned

	query := func(seq int, ids string) any {
		t.Helper()
		a.send(`{"v":1,"kind":"command","seq":` + strconv.Itoa(seq) + `,"feature":"players","action":"names","payload":{"ids":` + ids + `}}`)
		m := a.next()
		if m["kind"] != "event" || m["name"] != "names" {
			t.Fatalf("got %v, want a names event", m)
		}
		data := m["data"].(map[string]any)
		if data["seq"] != float64(seq) {
			t.Fatalf("names %v answer seq %v, want %d", data, data["seq"], seq)
		}
		return data["names"]
	}
	t.Run("NamesThoseHere", func(t *testing.T) {
		got := query(1, `[102, 7, 101]`)
		want := []any{
			map[string]any{"id": float64(bEntity), "characterId": "guest-2", "name": "Name of guest-2"},
			map[string]any{"id": float64(aEntity), "characterId": "char-1", "name": "Name of char-1"},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("names %v, want %v", got, want)
		}
	})
	t.Run("ErrBadPayload", func(t *testing.T) {
		for i, payload := range []string{`[]`, `{"ids":[]}`, `{"ids":[1],"more":1}`, `{"ids":["a"]}`} {
			seq := 10 + i
			a.send(`{"v":1,"kind":"command","seq":` + strconv.Itoa(seq) + `,"feature":"players","action":"names","payload":` + payload + `}`)
			if m := a.next(); m["kind"] != "error" || m["code"] != "bad_payload" || m["seq"] != float64(seq) {
				t.Fatalf("payload %s: got %v, want bad_payload", payload, m)
			}
		}
		a.send(`{"v":1,"kind":"command","seq":20,"feature":"players","action":"whois","payload":{}}`)
		if m := a.next(); m["kind"] != "error" || m["code"] != "unknown_command" {
			t.Fatalf("an unknown players action: %v", m)
		}
	})
	t.Run("GoneWhenLeft", func(t *testing.T) {
		b.send(`{"v":1,"kind":"command","seq":1,"feature":"test","action":"portal","payload":{}}`)
		if m := b.next(); m["kind"] != "ack" {
			t.Fatalf("portal command: %v", m)
		}
		if m := b.next(); m["kind"] != "transfer" {
			t.Fatalf("got %v, want the transfer", m)
		}
		got := query(30, `[102, 101]`)
		if names, _ := got.([]any); len(names) != 1 || names[0].(map[string]any)["id"] != float64(aEntity) {
			t.Fatalf("after the guest left the names are %v", got)
		}
	})
}
