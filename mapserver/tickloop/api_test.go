package tickloop_test

import (
	"reflect"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/ws"
)

// TestGameAPI_Welcome: every welcome carries the game's far rule and is followed by the
// frames the game gives for it, before anything else.
func TestGameAPI_Welcome(t *testing.T) {
	h := newHarness(t, func(h *harness, _ *ws.Server) { h.game.greet = true })
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	w := c.welcome()
	if fv, _ := w["farView"].(map[string]any); fv["radius"] != float64(60) || fv["every"] != float64(12) {
		t.Fatalf("welcome %v, want the game's far rule", w)
	}
	if m := c.next(); m["kind"] != "event" || m["name"] != "greeting" {
		t.Fatalf("got %v, want the game's frame right after the welcome", m)
	}
}

// TestGameAPI_Presence: the game hears what the kit did to a character: a takeover
// (Away, then Fresh), a transfer in flight and refused (Held, then Freed), a dropped
// connection (Away).
func TestGameAPI_Presence(t *testing.T) {
	h := newHarness(t, nil)
	h.orch.deny = apierr.EMAPQUARANTINED
	first := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	first.welcome()
	second := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1#2"}`)
	second.welcome()
	first.wantClose(4000)
	second.send(`{"v":1,"kind":"command","seq":1,"feature":"test","action":"portal"}`)
	second.next() // ack
	if m := second.next(); m["name"] != "transfer_denied" {
		t.Fatalf("got %v, want transfer_denied", m)
	}
	second.c.Close()
	want := []gameapi.Presence{gameapi.Away, gameapi.Fresh, gameapi.Held, gameapi.Freed, gameapi.Away}
	waitFor(t, "the game told of every change", func() bool { return reflect.DeepEqual(h.game.Presences("char-1"), want) })
}

// TestGameAPI_QuietCommand: a command the game answers itself gets no ack: the game's
// frame is the answer.
func TestGameAPI_QuietCommand(t *testing.T) {
	h := newHarness(t, nil)
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	c.welcome()
	c.send(`{"v":1,"kind":"command","seq":5,"feature":"test","action":"quiet"}`)
	c.send(`{"v":1,"kind":"command","seq":6,"feature":"test","action":"other"}`)
	m := c.next()
	if data, _ := m["data"].(map[string]any); m["name"] != "quiet" || data["seq"] != float64(5) {
		t.Fatalf("got %v, want the game's answer", m)
	}
	if m := c.next(); m["kind"] != "ack" || m["seq"] != float64(6) {
		t.Fatalf("got %v after the game's answer, want no ack of 5 but the ack of 6", m)
	}
}

// TestGameAPI_JoinRefused: a game that cannot place a character refuses the join with
// internal, and the connection is closed; the map goes on.
func TestGameAPI_JoinRefused(t *testing.T) {
	h := newHarness(t, nil)
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-refused"}`)
	if m := c.next(); m["kind"] != "error" || m["code"] != apierr.EINTERNAL {
		t.Fatalf("got %v, want internal", m)
	}
	c.wantClose(websocket.ClosePolicyViolation)
	ok := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-2"}`)
	ok.welcome()
}
