package ws_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
)

// moveHello is the hello a map hands a moved player's edge.
const moveHello = `{"v":1,"kind":"hello","ticket":"tok","formats":[2]}`

// TestLink_Move: on a link whose edge reads moves, Move ends the stream with a Move
// record after every frame queued before it, on a frame boundary, with no close frame;
// the stream's session learns it ended, nothing sent after it is written, and the
// link's other streams go on.
func TestLink_Move(t *testing.T) {
	h := newLinkHarness(t, nil)
	l := h.dialLinkWith(t, "compress, "+edgelink.FeatureMove)
	s := l.welcomed(1)
	other := l.welcomed(2)
	p := h.game.Peers()[0]

	big := strings.Repeat("s", 70<<10)
	h.srv.HoldWrites() // everything below waits in the lanes, then goes in one pass
	if !p.Send([]byte(`{"kind":"event","name":"moving"}`), false) || !p.Send([]byte(big), true) {
		t.Fatal("Send refused")
	}
	if !p.Move("gen-2", []byte(moveHello)) {
		t.Fatal("Move refused on a link whose edge reads moves")
	}
	p.Send([]byte("after the move"), false)
	if p.Move("gen-3", []byte(moveHello)) {
		t.Fatal("a second Move was taken")
	}
	h.srv.ReleaseWrites()

	if op, m := s.frame(); op != 0x1 || m != `{"kind":"event","name":"moving"}` {
		t.Fatalf("got %d %q, want the frame queued first", op, m)
	}
	if op, m := s.frame(); op != 0x2 || m != big {
		t.Fatalf("got %d and %d bytes, want the binary frame queued second", op, len(m))
	}
	if len(s.buf) != 0 {
		t.Fatalf("%d bytes after the last frame", len(s.buf))
	}
	r := s.record()
	if r.kind != edgelink.KindMove {
		t.Fatalf("record kind %d after the queued frames, want Move (%q)", r.kind, r.data)
	}
	var mv edgelink.Move
	if err := json.Unmarshal(r.data, &mv); err != nil || mv.Generation != "gen-2" || string(mv.Hello) != moveHello {
		t.Fatalf("move payload %s (%v)", r.data, err)
	}
	waitFor(t, "the moved stream's session to end", func() bool { return h.game.Closed() == 1 && h.srv.Active() == 1 })
	select {
	case r := <-s.recs:
		t.Fatalf("a record (kind %d) after the move", r.kind)
	default:
	}

	other.send(text("still here"))
	if _, m := other.frame(); m != "still here" {
		t.Fatalf("the other stream got %q", m)
	}
	// A move with nothing queued before it is the stream's next record.
	if !h.game.Peers()[1].Move("gen-2", []byte(moveHello)) {
		t.Fatal("Move refused")
	}
	if r := other.record(); r.kind != edgelink.KindMove {
		t.Fatalf("record kind %d, want Move", r.kind)
	}
	waitFor(t, "both sessions to end", func() bool { return h.game.Closed() == 2 && h.srv.Active() == 0 })
}

// TestLink_MoveOnlyWhereTheEdgeReadsIt: Move is false, and changes nothing, on a link
// whose request did not list the move feature and on a stream that is closing.
func TestLink_MoveOnlyWhereTheEdgeReadsIt(t *testing.T) {
	for name, features := range map[string]string{"NoHeader": "", "OtherFeatures": "compress, moves"} {
		t.Run(name, func(t *testing.T) {
			h := newLinkHarness(t, nil)
			s := h.dialLinkWith(t, features).welcomed(1)
			if h.game.Peers()[0].Move("gen-2", []byte(moveHello)) {
				t.Fatal("Move taken on a link whose edge does not read moves")
			}
			s.send(text("ping"))
			if _, m := s.frame(); m != "pong" {
				t.Fatalf("got %q, want the stream still served", m)
			}
		})
	}
	t.Run("Closing", func(t *testing.T) {
		h := newLinkHarness(t, nil)
		s := h.dialLinkWith(t, edgelink.FeatureMove).welcomed(1)
		p := h.game.Peers()[0]
		p.Close(mapserver.CloseNormal, "bye")
		if p.Move("gen-2", []byte(moveHello)) {
			t.Fatal("Move taken on a closing stream")
		}
		s.wantClose(mapserver.CloseNormal)
	})
	t.Run("HelloNotJSON", func(t *testing.T) {
		h := newLinkHarness(t, nil)
		s := h.dialLinkWith(t, edgelink.FeatureMove).welcomed(1)
		if h.game.Peers()[0].Move("gen-2", []byte("{not json")) {
			t.Fatal("Move taken with a hello that is not JSON")
		}
		s.send(text("ping"))
		if _, m := s.frame(); m != "pong" {
			t.Fatalf("got %q, want the stream still served", m)
		}
	})
}

// TestConn_MoveRefused: a WebSocket of its own cannot move; Move is false and the
// connection goes on.
func TestConn_MoveRefused(t *testing.T) {
	h := newHarness(t, nil)
	c := dial(t, h.url, nil)
	if err := c.WriteMessage(websocket.TextMessage, []byte("good")); err != nil {
		t.Fatal(err)
	}
	if _, m, err := c.ReadMessage(); err != nil || string(m) != `{"kind":"welcome"}` {
		t.Fatalf("got %q %v, want the welcome", m, err)
	}
	if h.game.Peers()[0].Move("gen-2", []byte(moveHello)) {
		t.Fatal("Move taken on a WebSocket of its own")
	}
	if err := c.WriteMessage(websocket.TextMessage, []byte("echo")); err != nil {
		t.Fatal(err)
	}
	if _, m, err := c.ReadMessage(); err != nil || string(m) != "echo" {
		t.Fatalf("got %q %v, want the connection still served", m, err)
	}
}
