package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/app"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapenv"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// criticalGate stands between the map and the orchestrator and holds every critical
// event until the test lets it through: the window in which an event has left the map
// and is not yet durable.
type criticalGate struct {
	arrived chan string // the event ids that reached the gate
	release chan struct{}
	once    sync.Once
}

// open lets every held and later event through.
func (g *criticalGate) open() { g.once.Do(func() { close(g.release) }) }

// openGate starts a reverse proxy to f's control listener that holds critical events.
func openGate(t *testing.T, f *fakeOrch) (*criticalGate, string) {
	t.Helper()
	target, err := url.Parse(f.HTTP.ControlURL())
	if err != nil {
		t.Fatal(err)
	}
	g := &criticalGate{arrived: make(chan string, 16), release: make(chan struct{})}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == mapcontract.PathPersistCritical || r.URL.Path == mapcontract.PathPersistCriticalBatch {
			g.arrived <- r.Header.Get("Content-Length")
			select {
			case <-g.release:
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(g.open) // runs first: a failed test never leaves a request held
	return g, srv.URL
}

// joinNear saves a character dx units east of an item and welcomes it on m.
func joinNear(t *testing.T, f *fakeOrch, m *app.Main, authKey string, it items.Item, dx float64) (*gamer, string) {
	t.Helper()
	j := f.join(t, `{"authKey":"`+authKey+`"}`)
	payload, _ := json.Marshal(record.CharacterStatePayload{
		MapID: mapgen.DefaultMapID, InstanceID: "dev-1", X: float64(it.Place.X)/100 + dx, Y: float64(it.Place.Y) / 100,
	})
	env := record.NewSnapshotEnvelope("test", 1, time.Now().UnixMilli(), payload)
	if _, err := f.DB.PutSnapshot(context.Background(), "dev-1", record.CharacterPartition(j.CharacterID), 1, env); err != nil {
		t.Fatal(err)
	}
	g := &gamer{player: dialMap(t, m), dec: wire.NewDecoder(0)}
	g.send(`{"v":1,"kind":"hello","ticket":"` + j.Ticket + `"}`)
	if w := g.next(); w["kind"] != "welcome" {
		t.Fatalf("got %v, want welcome", w)
	}
	return g, j.CharacterID
}

// storedItem returns the orchestrator's record of an item of instance dev-1.
func storedItem(t *testing.T, f *fakeOrch, id string) (items.Item, int) {
	t.Helper()
	list, err := f.DB.InstanceItems(context.Background(), "dev-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var found items.Item
	n := 0
	for _, it := range list {
		if it.ID == id {
			found, n = it, n+1
		}
	}
	return found, n
}

// itemEntity finds the item entity lying at it's place in a snapshot.
func itemEntity(s *wire.Snapshot, it items.Item) *wire.Entity {
	for i := range s.Entities {
		e := &s.Entities[i]
		if e.Kind == uint8(sim.KindItem) && e.X == sim.FromCentimetres(it.Place.X) && e.Y == sim.FromCentimetres(it.Place.Y) {
			return e
		}
	}
	return nil
}

// TestItems_PickupConfirmedAfterDurableAck picks an item up through a real map and
// the fake orchestrator's real store: the item is pending (a second player cannot take
// it) while the event is held on its way, the player gets nothing before the store
// committed it, and then the item is held once and gone from the world.
func TestItems_PickupConfirmedAfterDurableAck(t *testing.T) {
	f := mustOpenFakeOrch(t)
	gate, orchURL := openGate(t, f)
	m := mustOpenMap(t, f, func(c *mapenv.Config) { c.OrchURL = orchURL })

	list, err := f.DB.InstanceItems(context.Background(), "dev-1", nil)
	if err != nil || len(list) == 0 {
		t.Fatalf("the map seeded no items: %v", err)
	}
	it := list[0]
	a, aID := joinNear(t, f, m, "Ad4K3yAbCdEfGhIjKlMnOpQr", it, 0)
	b, _ := joinNear(t, f, m, "B0bK3yAbCdEfGhIjKlMnOpQr", it, 1)
	seen := b.snapshotWhere("the item", func(s *wire.Snapshot) bool { return itemEntity(s, it) != nil })
	if e := itemEntity(seen, it); e.State&sim.ItemPending != 0 || e.Template == 0 {
		t.Fatalf("item entity %+v", e)
	}

	a.send(`{"v":1,"kind":"command","seq":1,"feature":"items","action":"pickup","payload":{"itemId":"` + it.ID + `"}}`)
	<-gate.arrived
	b.send(`{"v":1,"kind":"command","seq":1,"feature":"items","action":"pickup","payload":{"itemId":"` + it.ID + `"}}`)
	if e := b.next(); e["kind"] != "error" || e["code"] != "item_pending" || e["seq"] != float64(1) {
		t.Fatalf("second pickup: %v", e)
	}
	b.snapshotWhere("the item pending", func(s *wire.Snapshot) bool {
		e := itemEntity(s, it)
		return e != nil && e.State&sim.ItemPending != 0
	})
	if st, n := storedItem(t, f, it.ID); n != 1 || !st.Place.InWorld() {
		t.Fatalf("before the ack the store has %d of it at %s", n, st.Place)
	}
	a.send(`{"v":1,"kind":"ping","t":1}`)
	if p := a.next(); p["kind"] != "pong" {
		t.Fatalf("got %v before the durable ack", p)
	}

	gate.open()
	if ack := a.next(); ack["kind"] != "ack" || ack["seq"] != float64(1) {
		t.Fatalf("got %v, want the pickup's ack", ack)
	}
	if st, n := storedItem(t, f, it.ID); n != 1 || st.Place.CharacterID != aID {
		t.Fatalf("after the ack the store has %d of it at %s", n, st.Place)
	}
	if ev := a.next(); ev["kind"] != "event" || ev["name"] != "item_picked" {
		t.Fatalf("got %v, want item_picked", ev)
	}
	if ev := b.next(); ev["kind"] != "event" || ev["name"] != "item_picked" {
		t.Fatalf("the other player got %v, want item_picked", ev)
	}
	b.snapshotWhere("the item gone", func(s *wire.Snapshot) bool { return itemEntity(s, it) == nil })
	b.send(`{"v":1,"kind":"command","seq":2,"feature":"items","action":"pickup","payload":{"itemId":"` + it.ID + `"}}`)
	if e := b.next(); e["kind"] != "error" || e["code"] != items.CodeNotFound {
		t.Fatalf("pickup of a held item: %v", e)
	}
	if far := list[1]; far.Place != it.Place {
		a.send(`{"v":1,"kind":"command","seq":2,"feature":"items","action":"pickup","payload":{"itemId":"` + far.ID + `"}}`)
		if e := a.next(); e["kind"] != "error" || e["code"] != "out_of_reach" {
			t.Fatalf("pickup out of reach: %v", e)
		}
	}
}
