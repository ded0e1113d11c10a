package app_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/app"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// joinAs joins character of authKey key through the fake orchestrator and says hello.
func joinAs(t *testing.T, f *fakeOrch, m *app.Main, key string) (*gamer, map[string]any) {
	t.Helper()
	j := f.join(t, `{"authKey":"`+key+`"}`)
	g := &gamer{player: dialMap(t, m), dec: wire.NewDecoder(0)}
	g.send(`{"v":1,"kind":"hello","ticket":"` + j.Ticket + `"}`)
	w := g.next()
	if w["kind"] != "welcome" {
		t.Fatalf("got %v, want welcome", w)
	}
	return g, w
}

// walk sends inputs from..to east, one command each, acknowledging snapshots on the way.
func (g *gamer) walk(cmdSeq *uint64, from, to uint64) {
	for s := from; s <= to; s++ {
		*cmdSeq++
		g.send(fmt.Sprintf(`{"v":1,"kind":"command","seq":%d,"feature":"movement","action":"input_batch","payload":%s}`,
			*cmdSeq, wire.EncodeInputBatch(nil, []sim.Input{{Seq: s, DX: 1}})))
	}
}

// TestProtocol_SecondTabWalksAtOnce: a second tab joining the same character takes it
// over; the first is told "replaced" and closed with 4000, and the second walks from
// input seq 1 although the first had sent far more.
func TestProtocol_SecondTabWalksAtOnce(t *testing.T) {
	f := mustOpenFakeOrch(t)
	m := mustOpenMap(t, f, nil)
	const key = "second-tab-key-0123456789abcdef"
	a, wa := joinAs(t, f, m, key)
	var cmd uint64
	a.walk(&cmd, 1, 6)
	a.snapshotWhere("input 6", func(s *wire.Snapshot) bool { return s.Seq == 6 })
	a.walk(&cmd, 7, 40) // sent faster than the tick: most wait or are dropped
	a.snapshotWhere("input 40", func(s *wire.Snapshot) bool { return s.Seq == 40 })

	b, wb := joinAs(t, f, m, key)
	if wb["characterId"] != wa["characterId"] {
		t.Fatalf("second tab entered %v, want %v", wb["characterId"], wa["characterId"])
	}
	if e := a.next(); e["kind"] != "error" || e["code"] != wire.CodeReplaced {
		t.Fatalf("first tab got %v, want error replaced", e)
	}
	a.wantClose(mapserver.CloseReplaced)

	start := b.snapshotWhere("the takeover's first snapshot", func(s *wire.Snapshot) bool { return self(s) != nil })
	var bcmd uint64
	b.walk(&bcmd, 1, 3)
	s := b.snapshotWhere("input 3 of the new tab", func(s *wire.Snapshot) bool { return s.Seq == 3 })
	if self(s).X <= self(start).X {
		t.Fatalf("the new tab did not walk: x %d after, %d before", self(s).X, self(start).X)
	}
}

// TestProtocol_ReloadWalks: a page reload inside the resume window (the old socket
// dropped, the character still waiting for a resume) joins again and walks at once.
func TestProtocol_ReloadWalks(t *testing.T) {
	f := mustOpenFakeOrch(t)
	m := mustOpenMap(t, f, nil)
	const key = "reload-key-0123456789abcdef"
	a, _ := joinAs(t, f, m, key)
	var cmd uint64
	a.walk(&cmd, 1, 30)
	a.snapshotWhere("input 30", func(s *wire.Snapshot) bool { return s.Seq == 30 })
	a.c.Close()
	waitFor(t, "the map to notice the dropped socket", func() bool {
		return m.Loop.Players() == 1 && connections(t, m) == 0
	})

	b, _ := joinAs(t, f, m, key)
	start := b.snapshotWhere("the reload's first snapshot", func(s *wire.Snapshot) bool { return self(s) != nil })
	var bcmd uint64
	b.walk(&bcmd, 1, 2)
	s := b.snapshotWhere("input 2 after the reload", func(s *wire.Snapshot) bool { return s.Seq == 2 })
	if self(s).X <= self(start).X {
		t.Fatalf("the reloaded page did not walk: x %d after, %d before", self(s).X, self(start).X)
	}
}

// connections reads the map's gauge of characters with a connection attached.
func connections(t *testing.T, m *app.Main) int {
	t.Helper()
	for _, line := range strings.Split(metrics(t, m), "\n") {
		if v, ok := strings.CutPrefix(line, "mapyard_map_connections "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return -1
}
