package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/itemgen"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// itemNearPortal is the item the map's generator places nearest to portal p of src
// (outside its trigger circle), where a test starts a character that picks it up and
// then walks into the portal.
func itemNearPortal(t *testing.T, src mapgen.MapConfig, p mapgen.Portal) items.Item {
	t.Helper()
	w, err := mapgen.Generate(src)
	if err != nil {
		t.Fatal(err)
	}
	var best items.Item
	bestD := math.Inf(1)
	for _, it := range itemgen.Generate(src, w, sim.NewColliders(w), items.DefaultCatalog()) {
		d := math.Hypot(float64(it.Place.X-p.X), float64(it.Place.Y-p.Y))
		if d > float64(p.Radius)+150 && d < bestD {
			best, bestD = it, d
		}
	}
	if bestD == math.Inf(1) {
		t.Fatalf("map %s places no item", src.MapID)
	}
	t.Logf("item %s (%s) lies %.1f m from the portal", best.ID, best.TemplateID, bestD/100)
	return best
}

// enterAtAs joins the saved character of authKey and moves it onto src at (x, y)
// units, as enterBesideAs does: the test redeems the join ticket in the default map's
// place and asks for the transfer as that map would.
func enterAtAs(t *testing.T, child *childOrchestrator, mapCred, base string, src mapgen.MapConfig, x, y float64, authKey string) *client.Client {
	t.Helper()
	var j public.JoinResponse
	testutil.PostJSON(t, child.public+public.PathJoin, "", fmt.Sprintf(`{"authKey":%q}`, authKey), http.StatusOK, &j)
	var r mapcontract.RedeemResult
	testutil.PostJSON(t, child.control+mapcontract.PathRedeem, mapCred, fmt.Sprintf(`{"instanceId":%q,"token":%q}`, j.InstanceID, j.Ticket), http.StatusOK, &r)
	req := fmt.Sprintf(`{"transferId":"tr-%s","characterId":%q,"fromInstanceId":%q,"toMapId":%q,"epoch":%d,`+
		`"state":{"mapId":%q,"x":%g,"y":%g,"attributes":{},"revision":%d}}`, randomHex(t, 6), r.CharacterID, j.InstanceID, src.MapID, r.Epoch,
		src.MapID, x, y, time.Now().UnixMicro())
	var a mapcontract.TransferAnswer
	testutil.PostJSON(t, child.control+mapcontract.PathRequestTransfer, mapCred, req, http.StatusOK, &a)
	c, err := client.Dial(context.Background(), base+a.WS, client.Hello{Ticket: a.Token}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitUntil(t, "the first snapshot on the source map", func() bool { _, ok := c.State().SelfEntity(); return ok })
	return c
}

// pickUp presses E beside the item and waits for the server's confirmation: the
// pickup answered and the item_picked event for this character.
func (p *page) pickUp(itemID string) {
	p.t.Helper()
	p.wait("the item in view", fmt.Sprintf(`[...mapyardDebug.session.latest().values()].some((e) => mapyardDebug.session.itemIdOf(e) === %q)`, itemID))
	p.wait("the item within reach", fmt.Sprintf(`(mapyardDebug.hud.pickable() || {}).itemId === %q`, itemID))
	p.keyDown("KeyE")
	p.keyUp("KeyE")
	p.wait("the pickup sent", fmt.Sprintf(`(mapyardDebug.hud.lastPick || {}).itemId === %q`, itemID))
	p.wait("the pickup confirmed", fmt.Sprintf(`mapyardDebug.hud.picking.size === 0 && mapyardDebug.events.some((e) =>
		e.name === "item_picked" && e.data.itemId === %q && e.data.characterId === mapyardDebug.session.welcome.characterId)`, itemID))
	var pick struct {
		SentAt, AnsweredAt float64
		Code               string
	}
	p.eval(`mapyardDebug.hud.lastPick`, &pick)
	if pick.Code != "" || pick.AnsweredAt < pick.SentAt {
		p.t.Fatalf("the pickup was answered %+v", pick)
	}
	p.t.Logf("pickup: pending for %.0f ms until the server confirmed it", pick.AnsweredAt-pick.SentAt)
}

// walkTo walks the player with the arrow keys to (x, y) units: first along x, then
// along y, each until it is within tolerance; stop says when to let go early (a
// transfer under way).
func (p *page) walkTo(x, y, tolerance float64, stop string) {
	p.t.Helper()
	axis := func(get string, target float64, plus, minus string) {
		var now float64
		p.eval(get, &now)
		if math.Abs(now-target) <= tolerance {
			return
		}
		key := plus
		if now > target {
			key = minus
		}
		p.keyDown(key)
		p.wait(fmt.Sprintf("walking to %.1f", target), fmt.Sprintf(`(%s) || Math.abs((%s) - %g) <= %g`, stop, get, target, tolerance))
		p.keyUp(key)
	}
	axis(`mapyardDebug.session.predicted.x / 16`, x, "ArrowRight", "ArrowLeft")
	axis(`mapyardDebug.session.predicted.y / 16`, y, "ArrowUp", "ArrowDown")
}

// inventoryShows waits until the inventory panel lists itemID, as the map's inventory
// event says, and checks that the prediction walks at the event's speed.
func (p *page) inventoryShows(itemID string) {
	p.t.Helper()
	p.wait("the item in the inventory panel", fmt.Sprintf(
		`mapyardDebug.session.inventory.entries.some((e) => e.itemId === %q) && document.querySelector('#inventory-list li[data-item-id=%q]') !== null`, itemID, itemID))
	var got struct {
		Head                  string
		Speed, InventorySpeed float64
	}
	p.eval(`({head: document.getElementById("inventory-head").textContent, speed: mapyardDebug.session.speed(),
		inventorySpeed: mapyardDebug.session.inventory.speed})`, &got)
	if got.Speed != got.InventorySpeed*16 {
		p.t.Fatalf("the prediction walks %g quanta/s, the inventory event says %g units/s", got.Speed, got.InventorySpeed)
	}
	p.t.Logf("inventory panel: %s", got.Head)
}
