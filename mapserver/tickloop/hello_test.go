package tickloop_test

import (
	"fmt"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/wire"
)

// The hello and the answers to messages that break the protocol.

func TestHello_Refused(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct {
		name, hello, code string
		close             int
	}{
		{"ErrTicketInvalid", `{"v":1,"kind":"hello","ticket":"forged"}`, "ticket_invalid", websocket.ClosePolicyViolation},
		{"ErrBadHello", `{"v":1,"kind":"ping"}`, "bad_request", websocket.ClosePolicyViolation},
		{"ErrResumeUnknown", `{"v":1,"kind":"hello","resume":"nope"}`, "ticket_invalid", websocket.ClosePolicyViolation},
		{"ErrUnsupportedFormat", `{"v":1,"kind":"hello","ticket":"char-1","formats":[1]}`, "unsupported_format", websocket.ClosePolicyViolation},
		{"ErrUnsupportedFormatNone", `{"v":1,"kind":"hello","ticket":"char-1","formats":[]}`, "unsupported_format", websocket.ClosePolicyViolation},
		{"ErrUnsupportedFormatResume", `{"v":1,"kind":"hello","resume":"nope","formats":[3]}`, "unsupported_format", websocket.ClosePolicyViolation},
		{"ErrFormatsNotNumbers", `{"v":1,"kind":"hello","ticket":"char-1","formats":["2"]}`, "bad_request", websocket.ClosePolicyViolation},
		{"ErrFormatsNotAnArray", `{"v":1,"kind":"hello","ticket":"char-1","formats":2}`, "bad_request", websocket.ClosePolicyViolation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := h.dial(t, tc.hello)
			if m := c.next(); m["kind"] != "error" || m["code"] != tc.code {
				t.Fatalf("got %v, want error %s", m, tc.code)
			}
			c.wantClose(tc.close)
		})
	}
	h.orch.mu.Lock()
	defer h.orch.mu.Unlock()
	if h.orch.used["char-1"] {
		t.Fatal("a hello refused for its formats used its ticket")
	}
}

// TestWelcomed_BadMessagesAnswered checks the answers docs/netcode.md names for a
// binary frame and a second hello after the welcome: bad_request, and the connection
// stays open.
func TestWelcomed_BadMessagesAnswered(t *testing.T) {
	h := newHarness(t, nil)
	c := h.dial(t, `{"v":1,"kind":"hello","ticket":"char-1"}`)
	c.welcome()
	if err := c.c.WriteMessage(websocket.BinaryMessage, []byte(`{"v":1,"kind":"ping","t":1}`)); err != nil {
		t.Fatal(err)
	}
	if m := c.next(); m["kind"] != "error" || m["code"] != "bad_request" || m["message"] != "messages are JSON text frames" {
		t.Fatalf("a binary frame: got %v", m)
	}
	c.send(`{"v":1,"kind":"hello","ticket":"char-1"}`)
	if m := c.next(); m["kind"] != "error" || m["code"] != "bad_request" || m["message"] != "already welcomed" {
		t.Fatalf("a second hello: got %v", m)
	}
	c.send(`{"v":1,"kind":"ping","t":7}`)
	if m := c.next(); m["kind"] != "pong" || m["t"] != float64(7) {
		t.Fatalf("the connection did not stay open: got %v", m)
	}
}

// TestHello_FormatsListingTheMapsIsWelcomed: a hello listing the map's snapshot format
// among others (or null) is welcomed, its ticket used, and snapshots follow.
func TestHello_FormatsListingTheMapsIsWelcomed(t *testing.T) {
	h := newHarness(t, nil)
	for i, hello := range []string{
		`{"v":1,"kind":"hello","ticket":"char-1","formats":[1,2,3]}`,
		`{"v":1,"kind":"hello","ticket":"char-2","formats":null}`,
	} {
		c := h.dial(t, hello)
		if w := c.welcome(); w["characterId"] != fmt.Sprintf("char-%d", i+1) || w["snapshotFormat"] != float64(wire.FormatVersion) {
			t.Fatalf("%s: welcome %v", hello, w)
		}
		c.snapshotWhere("any", func(fakeSnapshot) bool { return true })
	}
}
