package game_test

import (
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// wantSentence checks that a refusal has code and a message written for players: a
// sentence that names no character, item or instance.
func wantSentence(t *testing.T, err error, code string) {
	t.Helper()
	msg := apierr.Message(err)
	if apierr.Code(err) != code {
		t.Fatalf("got %v, want the refusal %s", err, code)
	}
	for _, leak := range []string{"c1", "guest", "forest-1", "not found", `"`} {
		if strings.Contains(msg, leak) {
			t.Fatalf("the player reads %q, which names %q", msg, leak)
		}
	}
	if msg == "" || !strings.HasSuffix(msg, ".") {
		t.Fatalf("the player reads %q, not a sentence", msg)
	}
}

// TestGame_GuestNoItems: a guest's item command is refused at once with guest_no_items
// and no event is started (the orchestrator keeps items for saved characters only), and
// so is a saved character's trade that would give a guest an item; a saved character's
// own pickup goes through.
func TestGame_GuestNoItems(t *testing.T) {
	g := mustItemGame(t)
	it := g.ItemSeed()[5]
	st := &record.CharacterState{MapID: "default", X: float64(it.Place.X) / 100, Y: float64(it.Place.Y) / 100}
	if _, err := g.Join(gameapi.Arrival{CharacterID: "guest-1", Guest: true, State: st}); err != nil {
		t.Fatal(err)
	}
	if err := join(g, "c1", st, held("coins", "coin", 9, "c1")); err != nil {
		t.Fatal(err)
	}
	r, _ := try(g, "guest-1", pickup(t, g, it.ID))
	if r.Critical != nil {
		t.Fatalf("a guest's pickup started event %+v", r.Critical)
	}
	wantSentence(t, r.Err, wire.CodeGuestNoItems)

	if err := refused(g, "c1", command(t, g, game.ActionOffer, `{"toCharacterId":"guest-1","itemId":"coins"}`)); err != nil {
		t.Fatal(err)
	}
	id := tradeID(t, step(g), "c1", "guest-1")
	r, _ = try(g, "guest-1", command(t, g, game.ActionAccept, `{"tradeId":"`+id+`"}`))
	if r.Critical != nil {
		t.Fatalf("a trade to a guest started event %+v", r.Critical)
	}
	wantSentence(t, r.Err, wire.CodeGuestNoItems)

	if ev := begin(t, g, "c1", "ev-1", pickup(t, g, it.ID)); ev.Kind != string(items.KindPickup) {
		t.Fatalf("a saved character's pickup: %+v", ev)
	}
}

// TestGame_RefusalsForPlayers: whatever refuses an item event, the item rules on the map
// or the orchestrator with its store's words (or the kit, before sending it), the
// player gets a code to act on and a sentence that names no character, item or
// instance.
func TestGame_RefusalsForPlayers(t *testing.T) {
	g := mustItemGame(t)
	it := g.ItemSeed()[5]
	spawnAt(t, g, "c1", it, 0)
	t.Run("ItemRuleOnTheMap", func(t *testing.T) {
		r, _ := try(g, "c1", game.Pickup{ItemID: "nowhere-1"})
		wantSentence(t, r.Err, items.CodeNotFound)
	})
	for _, tt := range []struct {
		name     string
		answer   error
		wantCode string
	}{
		{"ErrHolderNotSaved", apierr.Errorf(apierr.ENOTFOUND, `character "guest-abc" not found`), wire.CodeGuestNoItems},
		{"ErrItemRule", apierr.Errorf(items.CodeWrongPlace, `item "forest-1.item-3" is at character "char-9", not at instance "forest-1"`), items.CodeWrongPlace},
		{"ErrLease", apierr.Errorf(apierr.ECONFLICT, `character "c1" is held at epoch 4, not 2`), apierr.ECONFLICT},
		{"ErrMalformed", apierr.Errorf(apierr.EBADREQUEST, `critical event: eventId must be 1 to 128 printable characters`), apierr.EINTERNAL},
		{"ErrStore", apierr.Errorf(apierr.EUNAVAILABLE, `store closing: database "forest-1" is locked`), apierr.EMAPUNAVAILABLE},
		{"ErrKitUnreachable", apierr.Errorf(apierr.EMAPUNAVAILABLE, "the orchestrator did not confirm the action; nothing changed hands"), apierr.EMAPUNAVAILABLE},
	} {
		t.Run(tt.name, func(t *testing.T) {
			begin(t, g, "c1", "ev-"+tt.name, pickup(t, g, it.ID))
			_, err := settle(g, "ev-"+tt.name, tt.answer)
			wantSentence(t, err, tt.wantCode)
		})
	}
}
