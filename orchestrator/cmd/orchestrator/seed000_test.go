package main

// The acceptance criteria of seed 000 (docs/operations.md, "What the tests prove"), one
// test each, against a kit of the real orchestrator, the edge and real map containers,
// with the Go client playing. Criteria 1 to 4 are here; 5 to 8 in
// seed000_crash_test.go; 9 is a subtest of TestPage_PlaysInChromium.

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/edgeapi"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator/testutil"
	"github.com/mapyard/mapyard/orchestrator/ticket"
)

// TestSeed000_1_JoinThroughEdgeReceivesSnapshots: a player joins through the edge, lands
// on the default map with the world the map config generates, at a spawn point, and
// receives snapshots of itself whose ticks advance and which follow its walk.
func TestSeed000_1_JoinThroughEdgeReceivesSnapshots(t *testing.T) {
	k := newKit(t)
	cfg, err := mapgen.Resolve(k.def, mapgen.DefaultMapID, nil)
	if err != nil {
		t.Fatal(err)
	}
	world, err := mapgen.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}

	j := k.join(t, `{"name":"grace"}`)
	if j.InstanceID != k.def || j.MapID != mapgen.DefaultMapID || j.WS != edgeapi.WSPath(k.def) || j.Ticket == "" || !j.Disposable {
		t.Fatalf("join answer %+v, want a guest ticket to %s", j, k.def)
	}
	c := k.play(t, j.WS, j.Ticket, client.Options{})
	w := c.Welcome()
	if w.CharacterID != j.CharacterID || w.InstanceID != k.def || w.MapID != mapgen.DefaultMapID || w.Epoch < 1 || w.TickHz != 30 || w.SnapshotHz != 15 {
		t.Fatalf("welcome %+v", w)
	}
	if w.WorldHash != world.Hash() {
		t.Fatalf("welcome world hash %s, want %s", w.WorldHash, world.Hash())
	}
	if got, err := mapgen.Generate(w.MapConfig); err != nil || got.Hash() != world.Hash() {
		t.Fatalf("the welcome's map config generates %v (%v), want hash %s", got, err, world.Hash())
	}
	want := game.ArrivalPointOf(world, mapgen.DefaultMapID, j.CharacterID, nil)
	if x, y := selfPosition(t, c); want.Via != "spawn" || math.Abs(x-want.X) > 0.5 || math.Abs(y-want.Y) > 0.5 {
		t.Fatalf("landed at (%.2f, %.2f), want the spawn point %+v", x, y, want)
	}

	tick, n := c.State().Tick, c.Stats().Snapshots
	waitUntil(t, "ten more snapshots", func() bool { return c.Stats().Snapshots >= n+10 })
	if now := c.State().Tick; now <= tick {
		t.Fatalf("snapshot tick %d after %d", now, tick)
	}
	if st := c.Stats(); st.BadSnapshots != 0 || st.FullSnapshots == 0 {
		t.Fatalf("snapshots: %+v", st)
	}
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the pong", func() bool { return len(c.Stats().RTT) > 0 })

	// The snapshots show what the server simulates: the player's own walk.
	x0, y0 := selfPosition(t, c)
	for _, d := range [][2]float64{{1, 0}, {0, 1}, {-1, 0}, {0, -1}} {
		if _, err := steer(c, x0+3*d[0], y0+3*d[1], 0.3, nil, nil); err == nil {
			return
		}
	}
	t.Fatalf("the player could not walk 3 units from (%.1f, %.1f) in any direction", x0, y0)
}

// TestSeed000_2_PortalCarriesCharacterInventoryAndPosition plays portals with the Go
// client: a saved character picks an item up, walks into a portal to a map discovered
// from its own (which the orchestrator starts from the source's config through
// mapgen.Derive) and arrives there as the same character, beside the portal back (the
// portal's position rule), with its attributes and the item in its inventory. A portal
// to a map that cannot be started denies the transfer and the player stays where it
// stands.
func TestSeed000_2_PortalCarriesCharacterInventoryAndPosition(t *testing.T) {
	k := newKit(t, "ORCH_CHECKPOINT_MS=200", "MAP_SNAPSHOT_PUSH_MS=200")

	// The source map: small, flat, strewn with items, with a portal to a map nobody can
	// start and a portal to a map discovered from it. Its ids are this run's own, so
	// the derived map's id (and container name) is too.
	src := lootMap(t, k.deployment+"-src", 400, 20)
	nowhere := k.deployment + "-nowhere"
	src.GenerationRules.Portals = []mapgen.PortalRule{{TargetMapID: nowhere, Count: 1}, {Discover: true, Count: 1}}
	k.createMap(t, src)
	world, err := mapgen.Generate(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(world.Portals) != 2 || world.Portals[0].TargetMapID != nowhere || world.Portals[1].TargetSeed == 0 {
		t.Fatalf("source portals %+v", world.Portals)
	}

	t.Run("DeniedStaysPut", func(t *testing.T) {
		p := world.Portals[0]
		sx, sy := float64(p.X-p.Radius)/100-1, float64(p.Y)/100
		c := k.enterAtAs(t, testutil.NewAuthKey(t), src, sx, sy, `{"gold":3}`, client.Options{})
		ev, err := steer(c, float64(p.X)/100, float64(p.Y)/100, 0, func(e client.Event) bool {
			return e.Kind == "event" && strings.HasPrefix(e.Event.Name, "transfer")
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Event.Name != "transfer_denied" || ev.Event.Code != "map_unavailable" {
			t.Fatalf("event %+v, want transfer_denied map_unavailable", ev.Event)
		}
		// Still on the source map, still simulated where the walk took it: a few units
		// from where it started, inside the portal it could not take.
		if w := c.Welcome(); w.InstanceID != src.InstanceID {
			t.Fatalf("player moved to %s", w.InstanceID)
		}
		tick := c.State().Tick
		waitUntil(t, "snapshots after the refusal", func() bool { return c.State().Tick > tick+3 })
		x, y := selfPosition(t, c)
		if d := math.Hypot(x-sx, y-sy); d > 20 {
			t.Fatalf("player at (%.1f, %.1f), %.1f units from where it started", x, y, d)
		}
		if d := math.Hypot(x*100-float64(p.X), y*100-float64(p.Y)); d > float64(p.Radius)+100 {
			t.Fatalf("player at (%.1f, %.1f) is not at the portal it was refused", x, y)
		}
	})

	t.Run("ArrivesWithItsInventoryBesideThePortalBack", func(t *testing.T) {
		p := world.Portals[1]
		it, ix, iy := itemBeforePortal(t, seededItems(t, k.dbPath, src), world, 1)
		c := k.enterAtAs(t, testutil.NewAuthKey(t), src, ix, iy, `{"gold":12}`, client.Options{})
		character := c.Welcome().CharacterID
		pickUp(t, c, it.ID)

		ev, err := steer(c, float64(p.X)/100, float64(p.Y)/100, 0, func(e client.Event) bool {
			return e.Kind == "welcome" && e.Welcome.MapID == p.TargetMapID
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		w := ev.Welcome
		if w.InstanceID != mapgen.InstanceOfMap(p.TargetMapID) || w.CharacterID != character || w.TransferID == "" {
			t.Fatalf("destination welcome %+v", w)
		}
		// The destination map shows the player the item in its inventory (the event
		// that follows the welcome).
		for shown, deadline := false, time.After(15*time.Second); !shown; {
			select {
			case e := <-c.Events():
				if e.Kind == "event" && e.Event.Name == "inventory" {
					var inv struct{ Entries []struct{ ItemID string } }
					b, _ := json.Marshal(e.Event.Data)
					if err := json.Unmarshal(b, &inv); err != nil {
						t.Fatal(err)
					}
					for _, en := range inv.Entries {
						shown = shown || en.ItemID == it.ID
					}
				}
			case <-deadline:
				t.Fatalf("the destination map never showed %s in the player's inventory", it.ID)
			}
		}
		derived, err := mapgen.Derive(src, p.TargetSeed)
		if err != nil {
			t.Fatal(err)
		}
		if w.MapConfig.Seed != derived.Seed || w.MapConfig.Terrain != derived.Terrain {
			t.Fatalf("the derived map runs %+v, want mapgen.Derive's config", w.MapConfig)
		}
		dw, err := mapgen.Generate(derived)
		if err != nil {
			t.Fatal(err)
		}
		want := game.ArrivalPointOf(dw, derived.MapID, character, &record.CharacterState{MapID: src.MapID})
		if want.Via != "portal" {
			t.Fatalf("the derived map has no portal back: %+v", want)
		}
		waitUntil(t, "a snapshot of the derived map", func() bool { _, ok := c.State().SelfEntity(); return ok })
		if x, y := selfPosition(t, c); math.Abs(x-want.X) > 0.5 || math.Abs(y-want.Y) > 0.5 {
			t.Fatalf("arrived at (%.2f, %.2f), want beside the portal back at (%.2f, %.2f)", x, y, want.X, want.Y)
		}

		// The inventory the destination map loads for the character (as that map, at
		// the epoch it holds the character with) holds the item, once.
		var inv mapcontract.CharacterItemsAnswer
		testutil.PostJSON(t, k.orch.control+mapcontract.PathCharacterItems, k.mapCred(t, w.InstanceID),
			fmt.Sprintf(`{"instanceId":%q,"characterId":%q,"epoch":%d}`, w.InstanceID, character, w.Epoch), http.StatusOK, &inv)
		if len(inv.Items) != 1 || inv.Items[0].ID != it.ID || inv.Items[0].Place.CharacterID != character || inv.Items[0].Quantity != it.Quantity {
			t.Fatalf("the destination loads %+v for the character, want %s held", inv.Items, it.ID)
		}
		for _, g := range groundItems(t, k.dbPath, src.InstanceID) {
			if g.ID == it.ID {
				t.Fatalf("the picked item %s still lies on the source map", it.ID)
			}
		}

		// The destination owns the character now: its pushes reach the store with the
		// attributes the character carried through both transfers.
		waitUntil(t, "the derived map's push", func() bool {
			st := savedState(t, k.dbPath, character)
			return st != nil && st.InstanceID == w.InstanceID
		})
		if st := savedState(t, k.dbPath, character); string(st.Attributes) != `{"gold":12}` || st.MapID != derived.MapID {
			t.Fatalf("saved state %+v, want map %s with {\"gold\":12}", st, derived.MapID)
		}
	})
}

// itemBeforePortal picks, among the items lying on the map of world, the one nearest to
// portal i that lies well outside its trigger (and every other portal's) and from which
// the walk to portal i crosses no other portal; it returns it and a point one unit
// from it, away from the portal, to stand on.
func itemBeforePortal(t *testing.T, ground []items.Item, world *mapgen.World, i int) (items.Item, float64, float64) {
	t.Helper()
	p := world.Portals[i]
	px, py := float64(p.X)/100, float64(p.Y)/100
	best, bestD := -1, math.Inf(1)
	for n, it := range ground {
		x, y := float64(it.Place.X)/100, float64(it.Place.Y)/100
		d := math.Hypot(x-px, y-py)
		if d < float64(p.Radius)/100+5 || d >= bestD {
			continue
		}
		clear := true
		for m, o := range world.Portals {
			ox, oy := float64(o.X)/100, float64(o.Y)/100
			if m != i && segmentDistance(ox, oy, x, y, px, py) < float64(o.Radius)/100+3 {
				clear = false
			}
		}
		if clear {
			best, bestD = n, d
		}
	}
	if best < 0 {
		t.Fatalf("no item of %d lies clear of portal %+v", len(ground), p)
	}
	it := ground[best]
	x, y := float64(it.Place.X)/100, float64(it.Place.Y)/100
	return it, x + (x-px)/bestD, y + (y-py)/bestD
}

// segmentDistance is the distance from point (x, y) to the segment (ax, ay)-(bx, by).
func segmentDistance(x, y, ax, ay, bx, by float64) float64 {
	dx, dy := bx-ax, by-ay
	f := 0.0
	if l := dx*dx + dy*dy; l > 0 {
		f = min(1, max(0, ((x-ax)*dx+(y-ay)*dy)/l))
	}
	return math.Hypot(x-(ax+f*dx), y-(ay+f*dy))
}

// pickUp sends the pickup of itemID and waits for its item_picked event to the player.
func pickUp(t *testing.T, c *client.Client, itemID string) {
	t.Helper()
	if _, err := c.Command("items", "pickup", map[string]string{"itemId": itemID}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case e := <-c.Events():
			if e.Kind == "error" {
				t.Fatalf("pickup of %s refused: %+v", itemID, e.Error)
			}
			if id, who, ok := picked(e); ok && id == itemID {
				if who != c.Welcome().CharacterID {
					t.Fatalf("%s was picked up by %s", itemID, who)
				}
				return
			}
		case <-deadline:
			t.Fatalf("no item_picked for %s", itemID)
		}
	}
}

// picked returns the item and the character of an item_picked event.
func picked(e client.Event) (itemID, characterID string, ok bool) {
	if e.Kind != "event" || e.Event.Name != "item_picked" {
		return "", "", false
	}
	raw, _ := json.Marshal(e.Event.Data)
	var d game.ItemPicked
	if json.Unmarshal(raw, &d) != nil {
		return "", "", false
	}
	return d.ItemID, d.CharacterID, true
}

// TestSeed000_3_ReplayedTransferTokenDenied walks a player into a portal and takes the
// transfer token the map hands it: the token admits the player once to the destination
// through the edge; presented again there, while the player plays and after it left,
// it is refused with ticket_used and the connection is closed.
func TestSeed000_3_ReplayedTransferTokenDenied(t *testing.T) {
	k := newKit(t)
	dst := flatMap(t, k.deployment+"-dst")
	dst.Seed++
	src := flatMap(t, k.deployment+"-src")
	src.GenerationRules.Portals = []mapgen.PortalRule{{TargetMapID: dst.MapID, Count: 1}}
	k.createMap(t, dst)
	k.createMap(t, src)
	world, err := mapgen.Generate(src)
	if err != nil {
		t.Fatal(err)
	}
	p := world.Portals[0]

	c := k.enterAt(t, src, float64(p.X-p.Radius)/100-1, float64(p.Y)/100, client.Options{NoFollow: true})
	character := c.Welcome().CharacterID
	ev, err := steer(c, float64(p.X)/100, float64(p.Y)/100, 0, func(e client.Event) bool { return e.Kind == "transfer" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := ev.Transfer
	if tr.ToInstanceID != dst.InstanceID || tr.Token == "" {
		t.Fatalf("transfer %+v, want a token to %s", tr, dst.InstanceID)
	}

	arrived := k.play(t, tr.WS, tr.Token, client.Options{})
	if w := arrived.Welcome(); w.CharacterID != character || w.InstanceID != dst.InstanceID || w.TransferID != tr.TransferID {
		t.Fatalf("destination welcome %+v", w)
	}
	if code := deniedHello(t, k.ws+tr.WS, tr.Token); code != apierr.ETICKETUSED {
		t.Fatalf("replayed transfer token: %s, want %s", code, apierr.ETICKETUSED)
	}
	// The replay took nothing from the player who arrived.
	tick := arrived.State().Tick
	waitUntil(t, "snapshots after the replay", func() bool { return arrived.State().Tick > tick+3 })
	if w := arrived.Welcome(); w.InstanceID != dst.InstanceID {
		t.Fatalf("the player is on %s after the replay", w.InstanceID)
	}
	arrived.Close()
	if code := deniedHello(t, k.ws+tr.WS, tr.Token); code != apierr.ETICKETUSED {
		t.Fatalf("transfer token replayed after the player left: %s, want %s", code, apierr.ETICKETUSED)
	}
}

// deniedHello says hello with token on the WebSocket at url and returns the code of the
// error that refuses it, after checking the map then closes with 1008.
func deniedHello(t *testing.T, url, token string) string {
	t.Helper()
	c := dialWS(t, url)
	sendWS(t, c, `{"v":1,"kind":"hello","ticket":"`+token+`"}`)
	var e struct{ Kind, Code, Message string }
	readWS(t, c, &e)
	if e.Kind != "error" {
		t.Fatalf("hello answered %+v, want an error", e)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := c.ReadMessage(); !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Fatalf("refused hello (%s): connection ended with %v, want close 1008", e.Code, err)
	}
	return e.Code
}

// TestSeed000_4_InvalidExpiredWrongMapJoinTicketsDenied presents join tickets to the
// maps through the edge: forged, tampered or malformed ones are ticket_invalid (a hello
// without one is bad_request), one
// past its expiry ticket_expired, one for another map wrong_map (and still admits
// its player to its own map), one used before ticket_used; every refusal closes the
// connection with 1008. A map the edge does not know is refused before any upgrade.
func TestSeed000_4_InvalidExpiredWrongMapJoinTicketsDenied(t *testing.T) {
	k := newKit(t, "ORCH_JOIN_TICKET_TTL_MS=2000")
	other := flatMap(t, k.deployment+"-b")
	k.createMap(t, other)
	defWS := k.ws + edgeapi.WSPath(k.def)

	t.Run("Invalid", func(t *testing.T) {
		j := k.join(t, `{}`)
		tampered := []byte(j.Ticket)
		tampered[len(tampered)-1] ^= 1
		if tampered[len(tampered)-1] == '.' {
			tampered[len(tampered)-1] = 'A'
		}
		// A ticket of another host: well-formed and signed, with that host's key.
		now := time.Now()
		forged, err := ticket.NewSigner(testutil.Root(t, randomHex(t, 16)).TicketKey()).Mint(ticket.Claims{
			Kind: ticket.KindJoin, ID: ticket.NewID(12), Subject: "guest-" + ticket.NewID(12), CharacterID: "g-" + ticket.NewID(9),
			From: "-", To: k.def, IssuedAtMs: now.UnixMilli(), ExpiresAtMs: now.Add(time.Minute).UnixMilli(), Nonce: ticket.NewID(16),
		})
		if err != nil {
			t.Fatal(err)
		}
		for name, tok := range map[string]string{"tampered": string(tampered), "forged": forged, "malformed": "mt1.j.nothing"} {
			if code := deniedHello(t, defWS, tok); code != apierr.ETICKETINVALID {
				t.Errorf("%s ticket: %s, want %s", name, code, apierr.ETICKETINVALID)
			}
		}
		if code := deniedHello(t, defWS, ""); code != apierr.EBADREQUEST {
			t.Errorf("hello without a ticket: %s, want %s", code, apierr.EBADREQUEST)
		}
	})
	t.Run("Expired", func(t *testing.T) {
		j := k.join(t, `{}`)
		for time.Now().UnixMilli() <= j.ExpiresAtMs {
			time.Sleep(time.Until(time.UnixMilli(j.ExpiresAtMs + 1)))
		}
		if code := deniedHello(t, defWS, j.Ticket); code != apierr.ETICKETEXPIRED {
			t.Fatalf("expired ticket: %s, want %s", code, apierr.ETICKETEXPIRED)
		}
	})
	t.Run("WrongMap", func(t *testing.T) {
		j := k.join(t, `{}`)
		if code := deniedHello(t, k.ws+edgeapi.WSPath(other.InstanceID), j.Ticket); code != apierr.EWRONGMAP {
			t.Fatalf("ticket for %s at %s: %s, want %s", j.InstanceID, other.InstanceID, code, apierr.EWRONGMAP)
		}
		if c := k.play(t, j.WS, j.Ticket, client.Options{}); c.Welcome().CharacterID != j.CharacterID {
			t.Fatalf("the ticket's own map welcomed %+v", c.Welcome())
		}
	})
	t.Run("Replayed", func(t *testing.T) {
		j := k.join(t, `{}`)
		k.play(t, j.WS, j.Ticket, client.Options{})
		if code := deniedHello(t, defWS, j.Ticket); code != apierr.ETICKETUSED {
			t.Fatalf("replayed ticket: %s, want %s", code, apierr.ETICKETUSED)
		}
	})
	t.Run("UnknownMapRefusedAtEdge", func(t *testing.T) {
		_, resp, err := websocket.DefaultDialer.Dial(k.ws+edgeapi.WSPath("nowhere-1"), nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("unknown map: %v %v, want 503", err, resp)
		}
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("unknown map answered %q, want a structured error", resp.Header.Get("Content-Type"))
		}
	})
}
