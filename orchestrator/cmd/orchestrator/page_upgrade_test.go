package main

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	dockerclient "github.com/docker/docker/client"

	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// upgradesLive plays the character of authKey on the default map (deployment) and
// upgrades that map live to next, a second tag of the map's image, while the player
// walks: the page's socket is never closed (the same WebSocket, open, and no
// reconnect, resume, rejoin, map gone or transfer counted), the page never leaves
// "playing", it counts the one move and tells it in its event log as news (not as an
// error), it keeps the world it generated (the same object, not generated again), and
// the player walks on against the new container, every input acknowledged by it, with
// one ping loop as before.
func upgradesLive(p *page, cli *dockerclient.Client, child *childOrchestrator, secret, deployment, authKey, next string) {
	t := p.t
	dockertest.TagImage(t, cli, dockertest.MapImage(), next)
	p.exec(fmt.Sprintf(`localStorage.setItem("mapyard.authKey", %q)`, authKey))
	p.run(chromedp.Reload())
	p.wait("the menu", `mapyardDebug.state === "menu"`)
	p.run(chromedp.Click(chromedp.CSS("#play")))
	p.wait("playing on the default map", fmt.Sprintf(`mapyardDebug.state === "playing" && mapyardDebug.session.welcome.instanceId === %q && mapyardDebug.session.predicted !== null`, deployment))
	p.reconciled()
	character := p.character()
	before := getInstance(t, child.control, secret, deployment)

	// Every frame the page draws from here on is counted, and those that show no world
	// or no player (a blank canvas, a player gone for a moment); every ping it sends is
	// timed.
	p.exec(`mapyardDebug.states.length = 0;
		const s = mapyardDebug.session, v = mapyardDebug.view, draw = v.draw, send = s.ws.send;
		globalThis.beforeUpgrade = {ws: s.ws, world: s.world, worldId: s.world.id, generateMs: s.world.generateMs,
			welcome: s.welcome, stats: {...s.stats}, frames: 0, blank: 0, pings: []};
		v.draw = function (camera, self, ...rest) {
			beforeUpgrade.frames++;
			if (!camera || !self) beforeUpgrade.blank++;
			return draw.call(this, camera, self, ...rest);
		};
		s.ws.send = function (data) {
			if (String(data).includes('"kind":"ping"')) beforeUpgrade.pings.push(performance.now());
			return send.call(this, data);
		}`)
	// Walk through the upgrade: inputs sent while the map holds the character, and
	// while it moves, must not stall or confuse the page on the new container.
	p.keyDown("KeyD")
	var started orchestrator.Instance
	testutil.PostJSON(t, child.control+httpapi.PathAdminMaps+"/"+deployment+"/upgrade", secret,
		fmt.Sprintf(`{"image":%q}`, next), http.StatusAccepted, &started)
	began := time.Now()
	var done orchestrator.Instance
	waitFor(t, "the upgrade's end", 120*time.Second, func() bool {
		done = getInstance(t, child.control, secret, deployment)
		return done.Upgrade != nil && (done.Upgrade.Phase == orchestrator.UpgradeDone || done.Upgrade.Phase == orchestrator.UpgradeFailed)
	})
	took := time.Since(began)
	if u := done.Upgrade; u.Phase != orchestrator.UpgradeDone || u.Moved < 1 || u.Fallback {
		t.Fatalf("upgrade ended %+v, want done with the page's player moved", u)
	}
	if done.Image != next || done.ContainerID == before.ContainerID {
		t.Fatalf("after the upgrade %+v, want a new container of %s", done, next)
	}
	p.wait("the new container's welcome on the same socket", `mapyardDebug.session.welcome !== beforeUpgrade.welcome &&
		mapyardDebug.session.predicted !== null && mapyardDebug.state === "playing"`)
	p.keyUp("KeyD")

	var got struct {
		States                                                   []string
		Frames, Blank                                            int
		SameSocket, SocketOpen, SameWorld                        bool
		WorldID, WorldIDBefore, GenerateMs, GenerateMsBefore     float64
		Reconnects, Rejoins, Resumes, MapsGone, Transfers, Moves int
		Character, InstanceID, WorldHash, WorldHashBefore        string
		MovedLines, ErrorLines                                   []string
	}
	p.eval(`(() => {
		const s = mapyardDebug.session, b = beforeUpgrade, d = (k) => s.stats[k] - b.stats[k];
		const lines = [...document.querySelectorAll("#log > div")];
		return {states: mapyardDebug.states, sameSocket: s.ws === b.ws, socketOpen: !!s.ws && s.ws.readyState === WebSocket.OPEN,
			sameWorld: s.world === b.world, worldId: s.world.id, worldIdBefore: b.worldId,
			generateMs: s.world.generateMs, generateMsBefore: b.generateMs,
			reconnects: d("reconnects"), rejoins: d("rejoins"), resumes: d("resumes"), mapsGone: d("mapsGone"),
			transfers: d("transfers"), moves: s.stats.moves, frames: b.frames, blank: b.blank,
			character: s.welcome.characterId, instanceId: s.welcome.instanceId,
			worldHash: s.welcome.worldHash, worldHashBefore: b.welcome.worldHash,
			movedLines: lines.filter((l) => l.textContent.includes("upgraded")).map((l) => l.className + "|" + l.textContent),
			errorLines: lines.filter((l) => l.className === "error").map((l) => l.textContent)};
	})()`, &got)
	t.Logf("live upgrade with the page playing: %s to done; page states %v, %d frames drawn, log %q",
		took.Round(time.Millisecond), got.States, got.Frames, got.MovedLines)
	if !got.SameSocket || !got.SocketOpen {
		t.Errorf("the page's socket after the upgrade: the same %v, open %v; want the same one, open", got.SameSocket, got.SocketOpen)
	}
	if got.Reconnects != 0 || got.Rejoins != 0 || got.Resumes != 0 || got.MapsGone != 0 || got.Transfers != 0 {
		t.Errorf("during the upgrade the page counted %d reconnects, %d rejoins, %d resumes, %d maps gone, %d transfers; want none",
			got.Reconnects, got.Rejoins, got.Resumes, got.MapsGone, got.Transfers)
	}
	for _, s := range got.States {
		if s != "playing" {
			t.Errorf("the page went through the states %v during the upgrade; want playing only", got.States)
			break
		}
	}
	if got.Blank != 0 {
		t.Errorf("the page drew %d of %d frames without the world or the player during the upgrade; want none", got.Blank, got.Frames)
	}
	if got.Moves != 1 {
		t.Errorf("the page counted %d moves, want 1", got.Moves)
	}
	if !got.SameWorld || got.WorldID != got.WorldIDBefore || got.GenerateMs != got.GenerateMsBefore || got.WorldHash != got.WorldHashBefore {
		t.Errorf("the world after the upgrade: the same object %v, id %g (was %g), generated in %g ms (was %g), hash %s (was %s); want it kept",
			got.SameWorld, got.WorldID, got.WorldIDBefore, got.GenerateMs, got.GenerateMsBefore, got.WorldHash, got.WorldHashBefore)
	}
	if got.Character != character || got.InstanceID != deployment {
		t.Errorf("after the upgrade the page plays %s on %s, want %s on %s", got.Character, got.InstanceID, character, deployment)
	}
	if len(got.MovedLines) != 1 || !strings.HasPrefix(got.MovedLines[0], "|") || !strings.Contains(got.MovedLines[0], "(upgrade)") {
		t.Errorf("the event log tells the move as %q; want one line of news naming the upgrade", got.MovedLines)
	}
	if len(got.ErrorLines) != 0 {
		t.Errorf("the event log shows errors after the upgrade: %q", got.ErrorLines)
	}

	// Still playing, on the new container: back west over the ground just walked.
	p.walk("KeyA", 1)
	p.reconciled()
	if n := p.screenshot("after-upgrade"); n < 16 {
		t.Fatalf("the canvas shows %d colours after the upgrade", n)
	}
	// One ping a second, as before: the second welcome on the socket started no second
	// ping loop (two would send pings at most half a second apart, one way or the other).
	p.wait("two pings after the new welcome", `beforeUpgrade.pings.filter((t) => t > mapyardDebug.session.stats.welcomedAt - performance.timeOrigin).length >= 2`)
	var pings []float64
	p.eval(`beforeUpgrade.pings`, &pings)
	for i := 1; i < len(pings); i++ {
		if gap := pings[i] - pings[i-1]; gap < 500 {
			t.Fatalf("the page sent pings %.0f ms apart (at %.0f ms): more than one ping loop on the socket", gap, pings)
		}
	}
	if i := getInstance(t, child.control, secret, deployment); i.ContainerID != done.ContainerID {
		t.Fatalf("the map's container changed again after the upgrade: %s, then %s", done.ContainerID, i.ContainerID)
	}
}
