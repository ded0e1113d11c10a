package main

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/docker/docker/client"

	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/orchestrator"
)

// crashAndComeBack kills the page's map container while the player walks east and
// checks that the page shows "reconnecting" and then plays again as the same character,
// by itself, without a reload: told by the edge that its map went away
// (public.CloseMapGone), it rejoins at once, without trying a resume the restarted map
// cannot know. It logs the time from the restarted map being ready (as
// the orchestrator reports it, polled every 20 ms) to the player moving again (the
// first snapshot after the welcome that shows it elsewhere, by the page's clock), and
// how far the character was rolled back: from the last position the page saw before
// the connection dropped to where the restarted map put it.
func crashAndComeBack(p *page, cli *client.Client, control, secret, instanceID string) {
	t := p.t
	t.Helper()
	character := p.character()
	inst := getInstance(t, control, secret, instanceID)
	p.exec(`mapyardDebug.states.length = 0; globalThis.sameDocument = true;
		globalThis.before = {resumes: mapyardDebug.session.stats.resumes, mapsGone: mapyardDebug.session.stats.mapsGone}`)
	x0, _ := p.serverPosition()
	p.keyDown("KeyD")
	p.wait("walking east", fmt.Sprintf(`Math.abs(mapyardDebug.session.server.x/16 - %g) >= 1`, x0))
	killed := time.Now()
	if err := cli.ContainerKill(context.Background(), inst.ContainerID, "KILL"); err != nil {
		t.Fatal(err)
	}
	p.wait("the reconnecting state", `mapyardDebug.states.includes("reconnecting")`)
	p.keyUp("KeyD")
	// Walk back west as soon as the game is back: where the player came from is open
	// ground, and the page sends inputs from its first playing tick.
	p.keyDown("KeyA")
	defer p.keyUp("KeyA")
	var status string
	p.eval(`document.getElementById("status").textContent`, &status)
	// Said for people: no close code, no error code.
	if !strings.HasPrefix(status, "Reconnecting: ") || strings.ContainsAny(status, "0123456789_") {
		t.Errorf("the status line says %q while the map is down", status)
	}
	var ready time.Time
	for deadline := time.Now().Add(120 * time.Second); ready.IsZero(); time.Sleep(20 * time.Millisecond) {
		i := getInstance(t, control, secret, instanceID)
		if i.State == orchestrator.StateReady && i.ContainerID != inst.ContainerID {
			ready = time.Now()
		} else if time.Now().After(deadline) {
			t.Fatalf("the killed map is not ready again after 2 minutes: %+v", i)
		}
	}
	p.wait("moving again", `mapyardDebug.state === "playing" && mapyardDebug.session.stats.movedAt > 0`)
	var got struct {
		Character            string
		WelcomedAt, MovedAt  float64
		Rejoins              int
		SameDocument         bool
		DroppedAt, FirstSelf struct{ X, Y float64 }
		Resumed              bool
		Resumes, MapsGone    int // since the kill
	}
	p.eval(`(({session: s}) => ({character: s.welcome.characterId, welcomedAt: s.stats.welcomedAt, movedAt: s.stats.movedAt,
		rejoins: s.stats.rejoins, droppedAt: s.stats.droppedAt, firstSelf: s.firstSelf, resumed: !!s.welcome.resumed,
		sameDocument: globalThis.sameDocument === true,
		resumes: s.stats.resumes - globalThis.before.resumes, mapsGone: s.stats.mapsGone - globalThis.before.mapsGone}))(mapyardDebug)`, &got)
	if got.Character != character {
		t.Fatalf("came back as %s, want %s", got.Character, character)
	}
	if !got.SameDocument {
		t.Fatal("the page was reloaded")
	}
	if got.Rejoins < 1 || got.Resumed {
		t.Fatalf("came back with %d rejoins (resumed %v): the map's resume token cannot have survived its process", got.Rejoins, got.Resumed)
	}
	if got.MapsGone < 1 || got.Resumes != 0 {
		t.Fatalf("the edge closed the page's connection with %d close codes map gone (%d), and the page tried %d resumes: "+
			"want the code and no resume", got.MapsGone, public.CloseMapGone, got.Resumes)
	}
	readyMs := float64(ready.UnixMilli())
	back := math.Hypot(got.DroppedAt.X-got.FirstSelf.X, got.DroppedAt.Y-got.FirstSelf.Y) / sim.QuantaPerUnit
	t.Logf("map crash: killed to moving again %s; restarted map ready to welcome %.0f ms, to moving again %.0f ms (±20 ms); "+
		"rolled back %.2f units = %.0f ms of walking at %d u/s (last position seen (%.2f, %.2f), restarted at (%.2f, %.2f))",
		time.Since(killed).Round(time.Millisecond), got.WelcomedAt-readyMs, got.MovedAt-readyMs,
		back, back*1000/(sim.DefaultPlayerSpeed/sim.QuantaPerUnit), sim.DefaultPlayerSpeed/sim.QuantaPerUnit,
		got.DroppedAt.X/16, got.DroppedAt.Y/16, got.FirstSelf.X/16, got.FirstSelf.Y/16)
	// The state comes back from the last push (every 200 ms here: 1 unit of walking),
	// never from an older save; the slack covers a push still on its way.
	if back > 2.5 {
		t.Errorf("rolled back %.2f units, more than the push window allows", back)
	}
}

// playAsGuest reloads the page and plays as a guest.
func playAsGuest(t *testing.T, p *page) {
	t.Helper()
	p.run(chromedp.Reload())
	p.wait("the menu", `mapyardDebug.state === "menu"`)
	p.run(chromedp.Click(chromedp.CSS("#guest")))
	p.wait("playing as a guest", `mapyardDebug.state === "playing" && mapyardDebug.session.predicted !== null`)
	if c := p.character(); !strings.HasPrefix(c, "guest-") {
		t.Fatalf("a guest plays %s", c)
	}
}
