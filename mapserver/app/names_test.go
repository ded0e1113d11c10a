package app_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/wire"
	"github.com/mapyard/mapyard/orchestrator"
)

// TestNames_OverTheWire: through a real map and the fake orchestrator's real admission,
// a player's welcome carries its character's name, and another player who sees it in a
// snapshot learns that name by its entity id.
func TestNames_OverTheWire(t *testing.T) {
	f := mustOpenFakeOrch(t)
	m := mustOpenMap(t, f, nil)
	a, wa := joinAs(t, f, m, "Ad4K3yAbCdEfGhIjKlMnOpQr")
	b, wb := joinMap(t, f, m)
	if wa["name"] != orchestrator.DefaultCharacterName {
		t.Fatalf("a key's welcome names %v, want %q", wa["name"], orchestrator.DefaultCharacterName)
	}
	guest, _ := wb["name"].(string)
	if !strings.HasPrefix(guest, "Guest ") {
		t.Fatalf("a guest's welcome names %q", guest)
	}
	aEntity := self(a.snapshotWhere("its own entity", func(s *wire.Snapshot) bool { return self(s) != nil })).ID
	bEntity := self(b.snapshotWhere("its own entity", func(s *wire.Snapshot) bool { return self(s) != nil })).ID

	b.send(`{"v":1,"kind":"command","seq":1,"feature":"players","action":"names","payload":{"ids":[` +
		strconv.FormatUint(uint64(aEntity), 10) + `,` + strconv.FormatUint(uint64(bEntity), 10) + `]}}`)
	ev := b.next()
	if ev["kind"] != "event" || ev["name"] != wire.EventNames {
		t.Fatalf("got %v, want the names event", ev)
	}
	names, _ := ev["data"].(map[string]any)["names"].([]any)
	if len(names) != 2 {
		t.Fatalf("names %v, want both players", names)
	}
	first, second := names[0].(map[string]any), names[1].(map[string]any)
	if first["id"] != float64(aEntity) || first["characterId"] != wa["characterId"] || first["name"] != orchestrator.DefaultCharacterName ||
		second["id"] != float64(bEntity) || second["name"] != guest {
		t.Fatalf("names %v", names)
	}
}
