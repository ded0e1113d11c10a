package main

// The soak's traders (see soak_test.go): two saved characters passing one item round
// and round on the loot map, a pickup, a trade and a drop at a time, across faults.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
)

// soakTraders are the two traders and what was acknowledged to them, by kind.
type soakTraders struct {
	s      *soak
	item   items.Item
	a, b   *soakTrader
	x, y   float64         // where the item lies when it is on the ground
	holder string          // "a", "b" or "" (on the ground), as last acknowledged or read
	acked  map[string]int  // item_pickup, item_trade, item_drop acknowledged
	doubt  map[string]int  // sent and never answered (a fault came between)
	errs   int             // steps cut short by a fault
	seen   map[string]bool // kinds of step done at least once
}

// soakTrader is one of them.
type soakTrader struct {
	c         *client.Client
	authKey   string
	character string
}

// wait waits on c for the event a command of seq leads to: name with the item (ok),
// an error naming seq (refused), or the connection's end or 10 s (in doubt).
func (tr *soakTraders) wait(c *client.Client, seq uint64, name string, match func(client.Event) bool) (ok, doubt bool, e client.Event) {
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-c.Events():
			switch {
			case e.Kind == "event" && e.Event.Name == name && (match == nil || match(e)):
				return true, false, e
			case e.Kind == "error" && e.Error != nil && e.Error.Seq == seq && seq != 0:
				return false, false, e
			case e.Kind == "closed":
				return false, true, e
			}
		case <-deadline:
			return false, true, client.Event{}
		}
	}
}

// drainEvents drops every event c has queued.
func drainEvents(c *client.Client) {
	for {
		select {
		case <-c.Events():
		default:
			return
		}
	}
}

// eventItem is the item id of an item event's data.
func eventItem(e client.Event) string {
	raw, _ := json.Marshal(e.Event.Data)
	var d struct {
		ItemID string `json:"itemId"`
	}
	_ = json.Unmarshal(raw, &d)
	return d.ItemID
}

// run passes the item round until ctx ends: a picks it up where it lies, offers it to
// b standing beside it, b accepts, b drops it where it stands; again. A step whose
// answer never came (its connection ended in a fault) is counted in doubt, both join
// again, and the item's holder is read from the orchestrator's database.
func (tr *soakTraders) run(ctx context.Context) {
	for ctx.Err() == nil {
		if tr.stranded() {
			<-ctx.Done()
			return
		}
		// What the two saw meanwhile (other players' items, their own earlier steps)
		// is dropped, so the answer awaited next is not lost to a full queue.
		drainEvents(tr.a.c)
		drainEvents(tr.b.c)
		var err error
		switch tr.holder {
		case "":
			err = tr.pickup()
		case "a":
			err = tr.trade()
		case "b":
			err = tr.drop()
		}
		if err != nil {
			tr.errs++
			tr.s.t.Logf("soak: traders: %v; both join again", err)
			tr.a.c = tr.s.rejoin(ctx, tr.a.c, tr.a.authKey)
			tr.b.c = tr.s.rejoin(ctx, tr.b.c, tr.b.authKey)
			tr.resync()
		}
	}
}

// stranded reports whether a trader came back on another map than the loot map (a
// join while the loot map restarted): the two stop trading there.
func (tr *soakTraders) stranded() bool {
	for _, t := range []*soakTrader{tr.a, tr.b} {
		if id := t.c.Welcome().InstanceID; id != tr.s.loot.InstanceID {
			tr.s.t.Logf("soak: trader %s is on %s, not on the loot map: the traders stop", t.character, id)
			return true
		}
	}
	return false
}

func (tr *soakTraders) pickup() error {
	for _, t := range []*soakTrader{tr.a, tr.b} {
		if _, err := steer(t.c, tr.x, tr.y, 0.5, nil, nil); err != nil {
			return fmt.Errorf("walking to the item: %w", err)
		}
	}
	seq, err := tr.a.c.Command(game.FeatureItems, game.ActionPickup, map[string]string{"itemId": tr.item.ID})
	if err != nil {
		return err
	}
	return tr.settle(string(items.KindPickup), "a", tr.a.c, seq, "item_picked")
}

func (tr *soakTraders) trade() error {
	// Beside each other: after a fault the two came back where each was saved.
	self, ok := tr.a.c.State().SelfEntity()
	for deadline := time.Now().Add(5 * time.Second); !ok && time.Now().Before(deadline); self, ok = tr.a.c.State().SelfEntity() {
		time.Sleep(20 * time.Millisecond) // its first snapshot after a join
	}
	if !ok {
		return fmt.Errorf("the offering trader is in none of its snapshots")
	}
	ax, ay := client.Position(self)
	if _, err := steer(tr.b.c, ax, ay, 0.5, nil, nil); err != nil {
		return fmt.Errorf("walking to the other trader: %w", err)
	}
	seq, err := tr.a.c.Command(game.FeatureItems, game.ActionOffer, map[string]string{"itemId": tr.item.ID, "toCharacterId": tr.b.character})
	if err != nil {
		return err
	}
	ok, doubt, e := tr.wait(tr.b.c, 0, "trade_offered", func(e client.Event) bool { return eventItem(e) == tr.item.ID })
	if !ok {
		if doubt {
			return fmt.Errorf("no trade_offered for the offer (seq %d)", seq)
		}
		return fmt.Errorf("offer refused: %+v", e.Error)
	}
	raw, _ := json.Marshal(e.Event.Data)
	var offered game.TradeOffered
	if err := json.Unmarshal(raw, &offered); err != nil {
		return err
	}
	seq, err = tr.b.c.Command(game.FeatureItems, game.ActionAccept, map[string]string{"tradeId": offered.TradeID})
	if err != nil {
		return err
	}
	return tr.settle(string(items.KindTrade), "b", tr.b.c, seq, "item_traded")
}

func (tr *soakTraders) drop() error {
	seq, err := tr.b.c.Command(game.FeatureItems, game.ActionDrop, map[string]string{"itemId": tr.item.ID})
	if err != nil {
		return err
	}
	if err := tr.settle(string(items.KindDrop), "", tr.b.c, seq, "item_dropped"); err != nil {
		return err
	}
	if e, ok := tr.b.c.State().SelfEntity(); ok {
		tr.x, tr.y = client.Position(e)
	}
	return nil
}

// settle waits for the answer of the step of kind sent as seq on c: acknowledged, the
// item goes to holder; refused, nothing changed (the next round tries again); no
// answer, the step is in doubt.
func (tr *soakTraders) settle(kind, holder string, c *client.Client, seq uint64, name string) error {
	ok, doubt, e := tr.wait(c, seq, name, func(e client.Event) bool { return eventItem(e) == tr.item.ID })
	switch {
	case ok:
		tr.acked[kind]++
		tr.seen[kind] = true
		tr.holder = holder
		return nil
	case doubt:
		tr.doubt[kind]++
		return fmt.Errorf("%s (seq %d) not answered", kind, seq)
	default:
		tr.s.t.Logf("soak: traders: %s refused: %+v", kind, e.Error)
		time.Sleep(time.Second)
		return nil
	}
}

// resync reads who holds the item (or where it lies) from the orchestrator's database,
// the truth once an answer was lost.
func (tr *soakTraders) resync() {
	db, err := sql.Open("sqlite", sqlite.DSN(tr.s.k.dbPath, true))
	if err != nil {
		return
	}
	defer db.Close()
	var owner sql.NullString
	var x, y sql.NullInt64
	if db.QueryRow(`SELECT owner_character_id, location_x, location_y FROM inventory_items WHERE item_id = ?`, tr.item.ID).Scan(&owner, &x, &y) != nil {
		return
	}
	switch {
	case owner.String == tr.a.character:
		tr.holder = "a"
	case owner.String == tr.b.character:
		tr.holder = "b"
	default:
		tr.holder = ""
		if x.Valid && y.Valid {
			tr.x, tr.y = float64(x.Int64)/100, float64(y.Int64)/100
		}
	}
}

// checkTrades holds the traders' item to the soak's rules: every pickup, trade and
// drop acknowledged to the traders is one critical event of the loot map, and no event
// exists that was not acknowledged or left in doubt by a fault; all three kinds
// happened; and the item is where the last of them put it.
func (s *soak) checkTrades(t *testing.T, db *sql.DB, check func(bool, string, ...any)) {
	tr := s.traders
	rows, err := db.Query(`SELECT kind, payload FROM critical_events WHERE instance_id = ?`, s.loot.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	events := map[string]int{}
	for rows.Next() {
		var kind string
		var raw []byte
		var p items.Payload
		if err := rows.Scan(&kind, &raw); err != nil {
			t.Fatal(err)
		}
		if json.Unmarshal(raw, &p) == nil && p.Move.ItemID == tr.item.ID {
			events[kind]++
		}
	}
	var wrong []string
	for _, k := range []items.Kind{items.KindPickup, items.KindTrade, items.KindDrop} {
		kind := string(k)
		if events[kind] < tr.acked[kind] || events[kind] > tr.acked[kind]+tr.doubt[kind] || !tr.seen[kind] {
			wrong = append(wrong, fmt.Sprintf("%s: %d events, %d acknowledged, %d in doubt", kind, events[kind], tr.acked[kind], tr.doubt[kind]))
		}
	}
	var owner sql.NullString
	if err := db.QueryRow(`SELECT owner_character_id FROM inventory_items WHERE item_id = ?`, tr.item.ID).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": tr.a.character, "b": tr.b.character}[tr.holder]
	if owner.String != want {
		wrong = append(wrong, fmt.Sprintf("held by %q, the last step acknowledged says %q", owner.String, want))
	}
	check(len(wrong) == 0, "trades: item %s passed round by two traders: %d pickups, %d trades, %d drops acknowledged (%d steps cut short by a fault); %v",
		tr.item.ID, tr.acked[string(items.KindPickup)], tr.acked[string(items.KindTrade)], tr.acked[string(items.KindDrop)], tr.errs, wrong)
}
