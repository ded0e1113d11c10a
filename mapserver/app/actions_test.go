package app_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapenv"
)

// Modes of an orchProxy.
const (
	proxyPass = iota // forward everything
	proxyHold        // hold critical events until the mode changes or the caller gives up
	proxyDown        // drop every connection unanswered: the orchestrator is away
)

// orchProxy stands between a map and the fake orchestrator and can hold critical
// events on their way or play an orchestrator that is gone.
type orchProxy struct {
	mode      atomic.Int32
	arrived   chan struct{}
	abandoned chan struct{} // a held event whose sender gave up on it
	changed   chan struct{}
}

// set switches the mode and releases held events.
func (p *orchProxy) set(mode int32) {
	p.mode.Store(mode)
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

func openProxy(t *testing.T, f *fakeOrch) (*orchProxy, string) {
	t.Helper()
	target, err := url.Parse(f.HTTP.ControlURL())
	if err != nil {
		t.Fatal(err)
	}
	p := &orchProxy{arrived: make(chan struct{}, 16), abandoned: make(chan struct{}, 16), changed: make(chan struct{}, 1)}
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p.mode.Load() {
		case proxyDown:
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}
			return
		case proxyHold:
			if r.URL.Path == mapcontract.PathPersistCritical {
				// Read the body first: only then does the server notice a sender that
				// gave up (its context ends).
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				p.arrived <- struct{}{}
				for p.mode.Load() == proxyHold {
					select {
					case <-p.changed:
					case <-r.Context().Done():
						p.abandoned <- struct{}{}
						return
					}
				}
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { p.set(proxyPass) })
	return p, srv.URL
}

// itemCommand sends an item command and returns the answer (ack or error).
func (g *gamer) itemCommand(seq int, action, payload string) map[string]any {
	g.t.Helper()
	g.send(`{"v":1,"kind":"command","seq":` + itoa(seq) + `,"feature":"items","action":"` + action + `","payload":` + payload + `}`)
	return g.next()
}

func itoa(n int) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		if n /= 10; n == 0 {
			return string(b)
		}
	}
}

// wantKind fails unless m is of kind (and, for an error, of code).
func wantKind(t *testing.T, what string, m map[string]any, kind, code string) {
	t.Helper()
	if m["kind"] != kind || (code != "" && m["code"] != code) {
		t.Fatalf("%s: got %v, want %s %s", what, m, kind, code)
	}
}

// owners returns where the store has an item: how many live copies lie in the world of
// dev-1 and which characters of cs hold it.
func owners(t *testing.T, f *fakeOrch, id string, cs ...string) (inWorld int, holders []string) {
	t.Helper()
	list, err := f.DB.InstanceItems(context.Background(), "dev-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range list {
		if it.ID == id && it.Live() && it.Place.InWorld() {
			inWorld++
		}
	}
	for _, c := range cs {
		held, err := f.DB.CharacterItems(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range held {
			if it.ID == id {
				holders = append(holders, c)
			}
		}
	}
	return inWorld, holders
}

// TestItems_TradeIsAtomic gives an item from one player to another through a real map
// and the fake orchestrator's real store: the item is held by the receiver, once, and
// both inventories say so.
func TestItems_TradeIsAtomic(t *testing.T) {
	f := mustOpenFakeOrch(t)
	m := mustOpenMap(t, f, nil)
	list, _ := f.DB.InstanceItems(context.Background(), "dev-1", nil)
	it := list[0]
	a, aID := joinNear(t, f, m, "TrAK3yAbCdEfGhIjKlMnOpQr", it, 0)
	b, bID := joinNear(t, f, m, "TrBK3yAbCdEfGhIjKlMnOpQr", it, 1)
	a.nextInventory()
	b.nextInventory()
	wantKind(t, "pickup", a.itemCommand(1, "pickup", `{"itemId":"`+it.ID+`"}`), "ack", "")
	wantKind(t, "item_picked", a.next(), "event", "")
	if n := len(entryIDs(a.nextInventory())); n != 1 {
		t.Fatalf("a holds %d items after its pickup", n)
	}
	if ev := b.next(); ev["name"] != "item_picked" {
		t.Fatalf("b got %v", ev)
	}

	wantKind(t, "offer to nobody", a.itemCommand(2, "offer", `{"toCharacterId":"nobody","itemId":"`+it.ID+`"}`), "error", "trade_absent")
	wantKind(t, "offer", a.itemCommand(3, "offer", `{"toCharacterId":"`+bID+`","itemId":"`+it.ID+`"}`), "ack", "")
	offered := a.next()
	if offered["name"] != "trade_offered" {
		t.Fatalf("a got %v, want trade_offered", offered)
	}
	tradeID := offered["data"].(map[string]any)["tradeId"].(string)
	if ev := b.next(); ev["name"] != "trade_offered" || ev["data"].(map[string]any)["tradeId"] != tradeID {
		t.Fatalf("b got %v, want trade_offered", ev)
	}
	wantKind(t, "drop while offered", a.itemCommand(4, "drop", `{"itemId":"`+it.ID+`"}`), "error", "item_pending")
	wantKind(t, "accept", b.itemCommand(1, "accept", `{"tradeId":"`+tradeID+`"}`), "ack", "")
	if ev := b.next(); ev["name"] != "item_traded" {
		t.Fatalf("b got %v, want item_traded", ev)
	}
	if ev := a.next(); ev["name"] != "item_traded" {
		t.Fatalf("a got %v, want item_traded", ev)
	}
	if ids := entryIDs(b.nextInventory()); len(ids) != 1 || ids[0] != it.ID {
		t.Fatalf("b's inventory after the trade: %v", ids)
	}
	if ids := entryIDs(a.nextInventory()); len(ids) != 0 {
		t.Fatalf("a's inventory after the trade: %v", ids)
	}
	if w, holders := owners(t, f, it.ID, aID, bID); w != 0 || len(holders) != 1 || holders[0] != bID {
		t.Fatalf("the store has the item %d times on the ground and held by %v", w, holders)
	}
	wantKind(t, "accept twice", b.itemCommand(2, "accept", `{"tradeId":"`+tradeID+`"}`), "error", "trade_not_found")
}

// TestItems_OrchestratorAwayRefusesDrop drops an item while the orchestrator is gone:
// the drop is refused with map_unavailable and nothing changes hands; once it is back,
// the same drop goes through.
func TestItems_OrchestratorAwayRefusesDrop(t *testing.T) {
	f := mustOpenFakeOrch(t)
	proxy, orchURL := openProxy(t, f)
	m := mustOpenMap(t, f, func(c *mapenv.Config) { c.OrchURL = orchURL })
	list, _ := f.DB.InstanceItems(context.Background(), "dev-1", nil)
	it := list[0]
	a, aID := joinNear(t, f, m, "AwyK3yAbCdEfGhIjKlMnOpQr", it, 0)
	wantKind(t, "pickup", a.itemCommand(1, "pickup", `{"itemId":"`+it.ID+`"}`), "ack", "")
	wantKind(t, "item_picked", a.next(), "event", "")

	proxy.set(proxyDown)
	waitFor(t, "the map to notice the orchestrator is away", m.Link.Away)
	wantKind(t, "drop while away", a.itemCommand(2, "drop", `{"itemId":"`+it.ID+`"}`), "error", "map_unavailable")
	wantKind(t, "bad drop while away", a.itemCommand(3, "drop", `{"itemId":"not-mine"}`), "error", items.CodeNotFound)
	if w, holders := owners(t, f, it.ID, aID); w != 0 || len(holders) != 1 {
		t.Fatalf("a refused drop changed the store: %d on the ground, held by %v", w, holders)
	}

	proxy.set(proxyPass)
	waitFor(t, "the map to reach the orchestrator again", func() bool { return !m.Link.Away() })
	wantKind(t, "drop", a.itemCommand(4, "drop", `{"itemId":"`+it.ID+`"}`), "ack", "")
	if w, holders := owners(t, f, it.ID, aID); w != 1 || len(holders) != 0 {
		t.Fatalf("after the drop the store has it %d times on the ground, held by %v", w, holders)
	}
}

// TestItems_RestartedMapDuplicatesNothing consumes, drops and picks items up on a map,
// stops it with a drop still on its way to the store, and starts a fresh map of the
// instance against the same store: the character arrives holding what the store says,
// the ground holds what the store says lies there and nothing a character holds, and
// no item exists twice.
func TestItems_RestartedMapDuplicatesNothing(t *testing.T) {
	f := mustOpenFakeOrch(t)
	proxy, orchURL := openProxy(t, f)
	tune := func(c *mapenv.Config) { c.OrchURL = orchURL }
	m := mustOpenMap(t, f, tune)
	list, _ := f.DB.InstanceItems(context.Background(), "dev-1", nil)
	x := list[0]
	var food items.Item
	for _, it := range list[1:] {
		if tp, _ := items.DefaultCatalog().Template(it.TemplateID); tp.Consumable && it.Quantity > 1 {
			food = it
			break
		}
	}
	if food.ID == "" {
		t.Fatal("the generated items hold no stack of a consumable")
	}
	const keyA, keyB = "RstAK3yAbCdEfGhIjKlMnOpQ", "RstBK3yAbCdEfGhIjKlMnOpQ"
	a, aID := joinNear(t, f, m, keyA, x, 0)
	b, bID := joinNear(t, f, m, keyB, food, 0)

	wantKind(t, "b picks the food", b.itemCommand(1, "pickup", `{"itemId":"`+food.ID+`"}`), "ack", "")
	wantKind(t, "item_picked", b.next(), "event", "")
	wantKind(t, "b eats", b.itemCommand(2, "consume", `{"itemId":"`+food.ID+`"}`), "ack", "")
	if ev := b.next(); ev["name"] != "item_consumed" {
		t.Fatalf("b got %v, want item_consumed", ev)
	}
	if held, _ := f.DB.CharacterItems(context.Background(), bID); len(held) != 1 || held[0].Quantity != food.Quantity-1 {
		t.Fatalf("b holds %v after eating one of %d", held, food.Quantity)
	}
	wantKind(t, "consume an item not held", a.itemCommand(1, "consume", `{"itemId":"`+x.ID+`"}`), "error", items.CodeNotFound)

	wantKind(t, "a picks x", a.itemCommand(2, "pickup", `{"itemId":"`+x.ID+`"}`), "ack", "")
	wantKind(t, "item_picked", a.next(), "event", "")
	wantKind(t, "a drops x", a.itemCommand(3, "drop", `{"itemId":"`+x.ID+`"}`), "ack", "")
	wantKind(t, "item_dropped", a.next(), "event", "")
	wantKind(t, "a picks x again", a.itemCommand(4, "pickup", `{"itemId":"`+x.ID+`"}`), "ack", "")
	wantKind(t, "item_picked", a.next(), "event", "")

	// The map stops while the drop is on its way: it never reaches the store.
	proxy.set(proxyHold)
	a.send(`{"v":1,"kind":"command","seq":5,"feature":"items","action":"drop","payload":{"itemId":"` + x.ID + `"}}`)
	<-proxy.arrived
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	<-proxy.abandoned
	proxy.set(proxyPass)
	if w, holders := owners(t, f, x.ID, aID, bID); w != 0 || len(holders) != 1 || holders[0] != aID {
		t.Fatalf("after the stop the store has x %d times on the ground, held by %v", w, holders)
	}

	again := mustOpenMap(t, f, tune)
	a2, _ := joinNear(t, f, again, keyA, x, 0)
	if ids := entryIDs(a2.nextInventory()); len(ids) != 1 || ids[0] != x.ID {
		t.Fatalf("a arrives on the restarted map holding %v", ids)
	}
	b2, _ := joinNear(t, f, again, keyB, food, 0)
	if inv := b2.nextInventory(); len(entryIDs(inv)) != 1 {
		t.Fatalf("b arrives holding %v", inv)
	}
	c, cID := joinNear(t, f, again, "RstCK3yAbCdEfGhIjKlMnOpQ", x, 1)
	wantKind(t, "x is not on the ground", c.itemCommand(1, "pickup", `{"itemId":"`+x.ID+`"}`), "error", items.CodeNotFound)
	wantKind(t, "the food b holds is not on the ground", b2.itemCommand(1, "pickup", `{"itemId":"`+food.ID+`"}`), "error", items.CodeNotFound)
	wantKind(t, "a drops x on the new map", a2.itemCommand(1, "drop", `{"itemId":"`+x.ID+`"}`), "ack", "")
	if ev := c.next(); ev["name"] != "item_dropped" {
		t.Fatalf("c got %v, want item_dropped", ev)
	}
	wantKind(t, "c picks x", c.itemCommand(2, "pickup", `{"itemId":"`+x.ID+`"}`), "ack", "")
	if w, holders := owners(t, f, x.ID, aID, bID, cID); w != 0 || len(holders) != 1 || holders[0] != cID {
		t.Fatalf("x is %d times on the ground and held by %v", w, holders)
	}
}
