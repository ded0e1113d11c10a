//go:build linux

package edge_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/routetable"
)

// TestLink_MoveToNextContainer: a map that ends a player's stream with a move record
// has the edge carry the player's socket, still open, to the container of the named
// generation (once the route table shows it): the stream opens there with the player's
// own upgrade request, its 101 is not passed on, the map's hello goes first, and the
// player's frames follow, a frame begun towards the old container finished there.
// The player reads the old map's last frame, then the new one's, on one socket. A move
// to a generation the route table never shows closes the player with map gone.
func TestLink_MoveToNextContainer(t *testing.T) {
	old, next := newLinkMap(t), newLinkMap(t)
	orch := newFakeOrch(t, routetable.Route{InstanceID: "forest-1", State: "ready", GamePort: portOf(t, old.Server), Generation: "g1"})
	e := MustOpenEdge(t, orch.URL, nil)
	c, _, err := websocket.DefaultDialer.Dial(wsURL(e, "forest-1")+"?ticket=first", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	old.wait("the stream on the old container", func() bool { return len(old.opened) == 1 })
	if err := c.WriteMessage(websocket.TextMessage, []byte("before")); err != nil {
		t.Fatal(err)
	}
	old.wait("the player's first message", func() bool { return string(old.got[1]) == "before" })

	// The instance's next container; the old map moves the player there.
	orch.setRoutes("v2", routetable.Route{InstanceID: "forest-1", State: "ready", GamePort: portOf(t, next.Server), Generation: "g2"})
	move, _ := json.Marshal(edgelink.Move{Generation: "g2", Hello: json.RawMessage(`{"v":1,"kind":"hello","ticket":"handoff-token"}`)})
	old.send(old.link(0), edgelink.KindData, 1, text(`{"kind":"event","name":"moving"}`))
	old.send(old.link(0), edgelink.KindMove, 1, move)

	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, got, err := c.ReadMessage(); err != nil || string(got) != `{"kind":"event","name":"moving"}` {
		t.Fatalf("read %q, %v; want the old map's moving event", got, err)
	}
	next.wait("the stream opened on the next container with the hello", func() bool {
		return len(next.opened) == 1 && string(next.got[1]) == `{"v":1,"kind":"hello","ticket":"handoff-token"}`
	})
	if q := next.opened[0].URL.RawQuery; q != "ticket=first" {
		t.Fatalf("the next container got the upgrade request %q, want the player's own", q)
	}
	if err := c.WriteMessage(websocket.TextMessage, []byte("after")); err != nil {
		t.Fatal(err)
	}
	next.wait("the player's message on the next container", func() bool {
		return string(next.got[1]) == `{"v":1,"kind":"hello","ticket":"handoff-token"}after`
	})
	next.send(next.link(0), edgelink.KindData, 1, text("welcome again"))
	if _, got, err := c.ReadMessage(); err != nil || string(got) != "welcome again" {
		t.Fatalf("read %q, %v; want the next container's frame on the same socket", got, err)
	}
	if got := metricValue(t, e, `mapyard_edge_ws_moves_total{result="moved"}`); got != "1" {
		t.Fatalf("moves counted %q, want 1", got)
	}

	t.Run("ErrNoSuchGeneration", func(t *testing.T) {
		c2, _, err := websocket.DefaultDialer.Dial(wsURL(e, "forest-1"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		next.wait("the second player's stream", func() bool { return len(next.opened) == 2 })
		bad, _ := json.Marshal(edgelink.Move{Generation: "g9", Hello: json.RawMessage(`{}`)})
		next.send(next.link(0), edgelink.KindMove, 2, bad)
		_ = c2.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, _, err = c2.ReadMessage()
		if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != public.CloseMapGone {
			t.Fatalf("a move nowhere ended with %v, want close %d", err, public.CloseMapGone)
		}
	})
}
