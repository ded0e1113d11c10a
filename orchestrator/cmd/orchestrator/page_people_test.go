package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/docker/docker/client"

	mapclient "github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// panelsForPeople feeds the page's panels what the map sends (an inventory, an
// equipment result, an NPC hesitating about the player) and checks what the player
// reads: Equip is not offered on an item whose skill the character lacks, an equipment
// result is one line of the log, and an NPC that keeps changing its mind is one line.
func panelsForPeople(p *page) {
	t := p.t
	t.Helper()
	var got struct {
		Without, With, Gate  string
		EquipLines, NPCLines []string
		Requires             struct{ Skill string }
	}
	p.eval(`(() => {
		const s = mapyardDebug.session, h = mapyardDebug.hud, real = s.inventory;
		const lines = [], log = h.log;
		h.log = (text, kind) => { lines.push(text); log(text, kind); };
		const gated = mapyard.itemTemplates.find((t) => t.requires && t.slot);
		const row = () => document.querySelector('#inventory-list li[data-item-id="test-gated"]');
		const equipButton = () => row().querySelector("button.equip") ? "Equip" : "";
		s.inventory = {entries: [{itemId: "test-gated", templateId: gated.id, quantity: 1, compartment: "backpack"}],
			equipment: {}, weight: 0, weightLimit: 1000, speed: real ? real.speed : 5, skills: {}};
		h.render();
		const out = {without: equipButton(), gate: (row().querySelector(".gate") || {}).textContent || "", requires: gated.requires};
		s.inventory.skills = {[gated.requires.skill]: gated.requires.level};
		h.render();
		out.with = equipButton();
		s.inventory = real;
		h.render();

		s.commands.set(99999, {seq: 99999, feature: "equipment", action: "equip", payload: {itemId: "test-gated", slot: gated.slot}});
		s.gameEvent({v: 1, kind: "event", name: "equip_result", data: {seq: 99999, operation: "equip", slot: gated.slot, success: true}});
		out.equipLines = lines.splice(0);
		for (let i = 0; i < 24; i++) {
			s.gameEvent({v: 1, kind: "event", name: "npc_state", data: {id: 424242, from: i % 2 ? "alert" : "chasing",
				to: i % 2 ? "chasing" : "alert", target: s.selfId}});
		}
		out.npcLines = lines.splice(0);
		h.log = log;
		return out;
	})()`, &got)
	if got.Without != "" || !strings.Contains(got.Gate, got.Requires.Skill) {
		t.Errorf("an item needing %s is offered %q without the skill (note %q)", got.Requires.Skill, got.Without, got.Gate)
	}
	if got.With != "Equip" {
		t.Errorf("with the skill, the item is not offered Equip")
	}
	if len(got.EquipLines) != 1 {
		t.Errorf("an equipment result is logged %d times: %q", len(got.EquipLines), got.EquipLines)
	}
	if len(got.NPCLines) > 1 {
		t.Errorf("an NPC changing its mind 24 times is %d lines of the log: %q", len(got.NPCLines), got.NPCLines)
	}
}

// enterAt joins with body (a key's, or {} for a guest) and moves the character onto
// dst at (x, y) units, as enterAtAs does, and returns the connected Go client and the
// join's answer (with its rejoin credential).
func enterAt(t *testing.T, child *childOrchestrator, mapCred, base string, dst mapgen.MapConfig, x, y float64, body string) (*mapclient.Client, public.JoinResponse) {
	t.Helper()
	var j public.JoinResponse
	testutil.PostJSON(t, child.public+public.PathJoin, "", body, http.StatusOK, &j)
	var r mapcontract.RedeemResult
	testutil.PostJSON(t, child.control+mapcontract.PathRedeem, mapCred, fmt.Sprintf(`{"instanceId":%q,"token":%q}`, j.InstanceID, j.Ticket), http.StatusOK, &r)
	req := fmt.Sprintf(`{"transferId":"tr-%s","characterId":%q,"fromInstanceId":%q,"toMapId":%q,"epoch":%d,`+
		`"state":{"mapId":%q,"x":%g,"y":%g,"attributes":{},"revision":%d}}`, randomHex(t, 6), r.CharacterID, j.InstanceID, dst.MapID, r.Epoch,
		dst.MapID, x, y, time.Now().UnixMicro())
	var a mapcontract.TransferAnswer
	testutil.PostJSON(t, child.control+mapcontract.PathRequestTransfer, mapCred, req, http.StatusOK, &a)
	c, err := mapclient.Dial(context.Background(), base+a.WS, mapclient.Hello{Ticket: a.Token}, mapclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitUntil(t, "the first snapshot on "+dst.MapID, func() bool { _, ok := c.State().SelfEntity(); return ok })
	return c, j
}

// guestBesideItems plays a guest in the page beside an item and a player named Zed on
// a small map strewn with items: the page names itself and Zed; the item in reach is
// not offered (no ring, and E tells the guest to sign in); and a pickup sent anyway is
// refused by the map with guest_no_items, in words for players, the item left lying.
func guestBesideItems(p *page, cli *client.Client, child *childOrchestrator, secret, deployment, dbPath, edgeURL string) {
	t := p.t
	t.Helper()
	yard := lootMap(t, deployment+"-yard", 120, 15)
	postMap(t, child.control, secret, yard)
	waitInstance(t, child.control, secret, yard.InstanceID, orchestrator.StateReady, 60*time.Second)
	ground := seededItems(t, dbPath, yard)
	it := ground[len(ground)/2]
	x, y := float64(it.Place.X)/100, float64(it.Place.Y)/100
	mapCred, _ := credentialsOf(t, inspect(t, cli, getInstance(t, child.control, secret, deployment).ContainerID), secret)
	ws := "ws" + strings.TrimPrefix(edgeURL, "http")

	zedKey := testutil.NewAuthKey(t)
	testutil.CharacterAPI{Base: edgeURL}.Create(t, zedKey, "Zed")
	enterAt(t, child, mapCred, ws, yard, x-1.5, y, fmt.Sprintf(`{"authKey":%q}`, zedKey))
	_, guest := enterAt(t, child, mapCred, ws, yard, x+1, y, `{}`)

	// The page plays a guest of its own, then takes the one beside the item over with
	// that guest's rejoin credential, as after a crash of its map.
	playAsGuest(t, p)
	p.exec(fmt.Sprintf(`const s = mapyardDebug.session; s.rejoinCred = %q; s.resume = null; s.ws.close()`, guest.Rejoin))
	p.wait("the guest beside the item", fmt.Sprintf(`mapyardDebug.state === "playing" && mapyardDebug.session.welcome.characterId === %q &&
		mapyardDebug.session.predicted !== null`, guest.CharacterID))

	t.Run("NamesNotIds", func(t *testing.T) {
		p := p.in(t)
		p.wait("Zed named", `[...mapyardDebug.session.latest().values()].some((e) => e.kind === 1 && (mapyardDebug.names.of(e.id) || {}).name === "Zed")`)
		var got struct{ Self, Welcome string }
		p.eval(`({self: document.getElementById("self-name").textContent, welcome: mapyardDebug.session.welcome.name})`, &got)
		if !strings.HasPrefix(got.Welcome, "Guest ") || got.Self != got.Welcome || strings.Contains(got.Self, guest.CharacterID) {
			t.Fatalf("the page calls its guest %q (welcome %q), character %s", got.Self, got.Welcome, guest.CharacterID)
		}
		p.screenshot("names")
	})
	t.Run("GuestNotOfferedE", func(t *testing.T) {
		p := p.in(t)
		p.wait("the item within reach", fmt.Sprintf(`[...mapyardDebug.session.latest().values()].some((e) => mapyardDebug.session.itemIdOf(e) === %q &&
			Math.hypot(e.x - mapyardDebug.session.predicted.x, e.y - mapyardDebug.session.predicted.y) <= 32)`, it.ID))
		var offered bool
		p.eval(`mapyardDebug.hud.pickable() !== null`, &offered)
		if offered {
			t.Fatal("a guest is offered E on an item it cannot keep")
		}
		p.keyDown("KeyE")
		p.keyUp("KeyE")
		p.wait("the sign-in message", `document.getElementById("log").textContent.includes("Sign in (Play) to keep")`)
		var sent bool
		p.eval(`mapyardDebug.hud.lastPick !== null`, &sent)
		if sent {
			t.Fatal("E sent a guest's pickup")
		}
		p.wait("the panel's sign-in message", `document.getElementById("inventory-empty").textContent.includes("Sign in (Play)")`)
	})
	t.Run("ErrGuestNoItems", func(t *testing.T) {
		p := p.in(t)
		p.exec(fmt.Sprintf(`mapyardDebug.session.command("items", "pickup", {itemId: %q})`, it.ID))
		p.wait("the map's refusal", `document.getElementById("log").textContent.includes("Could not pick that up: Guests cannot keep items")`)
		var log string
		p.eval(`document.getElementById("log").textContent`, &log)
		for _, raw := range []string{"guest-", "not_found", "not found", it.ID} {
			if strings.Contains(log, raw) {
				t.Fatalf("the log shows %q: %s", raw, log)
			}
		}
		if !slices.ContainsFunc(groundItems(t, dbPath, yard.InstanceID), func(g items.Item) bool { return g.ID == it.ID }) {
			t.Fatalf("item %s no longer lies on %s", it.ID, yard.InstanceID)
		}
	})
}

// backToMenuAndPlayAgain leaves the game for the menu with the Menu button, stays
// there a while and plays the key's character again: the menu lists the characters,
// and the first frame's time leaves out the time spent in the menu.
func backToMenuAndPlayAgain(p *page) {
	t := p.t
	t.Helper()
	p.run(chromedp.Click(chromedp.CSS("#to-menu")))
	p.wait("the menu", `mapyardDebug.state === "menu" && !document.getElementById("menu").hidden &&
		document.getElementById("inventory").hidden && document.getElementById("to-menu").hidden`)
	p.wait("the key's characters listed", `document.querySelectorAll("#characters li").length > 0`)
	p.wait("a while in the menu", `performance.now() - mapyardDebug.menuAt >= 1500`)
	p.run(chromedp.Click(chromedp.CSS("#play")))
	p.wait("playing again", `mapyardDebug.state === "playing" && mapyardDebug.session.predicted !== null && mapyardDebug.firstFrameMs > 0`)
	var d struct {
		FirstFrameMs, ReadyMs, FirstFrameAfterPlayMs, PlayAt float64
		Character, Name, Self                                string
	}
	p.eval(`({firstFrameMs: mapyardDebug.firstFrameMs, readyMs: mapyardDebug.readyMs, firstFrameAfterPlayMs: mapyardDebug.firstFrameAfterPlayMs,
		playAt: mapyardDebug.playAt, character: mapyardDebug.session.welcome.characterId, name: mapyardDebug.session.welcome.name,
		self: document.getElementById("self-name").textContent})`, &d)
	if strings.HasPrefix(d.Character, "guest-") || d.Name == "" || d.Self != d.Name {
		t.Fatalf("Play from the menu plays %s named %q (the panel says %q), want the key's character by its name", d.Character, d.Name, d.Self)
	}
	// Drawn at PlayAt + FirstFrameAfterPlayMs after the page began loading, of which
	// the menus took at least 1.5 s: the figure counts the loading and the joining only.
	if math.Abs(d.FirstFrameMs-(d.ReadyMs+d.FirstFrameAfterPlayMs)) > 1 || d.FirstFrameMs > d.PlayAt+d.FirstFrameAfterPlayMs-1500 {
		t.Fatalf("first frame %.0f ms: loading %.0f ms, Play to first frame %.0f ms, played %.0f ms after loading began",
			d.FirstFrameMs, d.ReadyMs, d.FirstFrameAfterPlayMs, d.PlayAt)
	}
	t.Logf("page: back from the menu, first frame %.0f ms (loading %.0f + joining %.0f)", d.FirstFrameMs, d.ReadyMs, d.FirstFrameAfterPlayMs)
}
