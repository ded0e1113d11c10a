package main

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	dockerclient "github.com/docker/docker/client"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// playsTag plays tag in the page: a character of a new key is brought onto the arena
// (run by tag's own image) by a Go client that then leaves, and the page plays it with
// that key. The page knows nothing of tag: it draws the arena from the snapshots and
// their entity kinds (the four bases as zones, the player who is it marked: the page's
// own player, alone in the arena), tells the player the game's event in its own words,
// and walks there with the kit's movement.
func playsTag(p *page, cli *dockerclient.Client, child *childOrchestrator, secret, deployment, dbPath, public string) {
	t := p.t
	image := dockertest.TagGameImage()
	dockertest.RequireImage(t, cli, image)
	arena, err := mapgen.Template("tag")
	if err != nil {
		t.Fatal(err)
	}
	testutil.PostJSON(t, child.control+httpapi.PathAdminMaps, secret,
		fmt.Sprintf(`{"instanceId":%q,"mapId":"tag","image":%q}`, arena.InstanceID, image), http.StatusCreated, nil)
	waitInstance(t, child.control, secret, arena.InstanceID, orchestrator.StateReady, 60*time.Second)
	sp := generate(t, arena).Spawns[0]
	mapCred, _ := credentialsOf(t, inspect(t, cli, getInstance(t, child.control, secret, deployment).ContainerID), secret)
	key := "Tag9" + randomHex(t, 12) + "KeyAbCdEf"
	goClient := enterAtAs(t, child, mapCred, "ws"+strings.TrimPrefix(public, "http"), arena, float64(sp.X)/100, float64(sp.Y)/100, key)
	player := goClient.Welcome().CharacterID
	goClient.Close()
	waitUntil(t, "the character saved in the arena", func() bool {
		st := savedState(t, dbPath, player)
		return st != nil && st.InstanceID == arena.InstanceID
	})

	p.exec(fmt.Sprintf(`localStorage.setItem("mapyard.authKey", %q)`, key))
	p.run(chromedp.Reload())
	p.wait("the menu", `mapyardDebug.state === "menu"`)
	p.run(chromedp.Click(chromedp.CSS("#play")))
	p.wait("playing in the arena", `mapyardDebug.state === "playing" && mapyardDebug.session.welcome.mapId === "tag" && mapyardDebug.session.predicted !== null`)
	if c := p.character(); c != player {
		t.Fatalf("the page plays %s, want the key's %s", c, player)
	}
	p.wait("the bases drawn as zones of their radius", `[...mapyardDebug.session.latest().values()].filter((e) => e.kind === 4 && e.template === 300).length === 4`)
	p.wait("the page's player marked as it", `(mapyardDebug.session.latest().get(mapyardDebug.session.selfId) || {}).state & 1`)

	// A second player arrives beside the page's (a Go client), shielded for a moment;
	// the page walks onto it, and once its shield is gone the touch makes it it.
	var at struct{ X, Y float64 }
	p.eval(`({x: mapyardDebug.session.predicted.x / 16, y: mapyardDebug.session.predicted.y / 16})`, &at)
	other := enterAtAs(t, child, mapCred, "ws"+strings.TrimPrefix(public, "http"), arena, at.X+2, at.Y, "Tag8"+randomHex(t, 12)+"KeyAbCdEf")
	p.wait("the other player drawn, shielded", `[...mapyardDebug.session.latest().values()].some((e) => e.kind === 1 && e.id !== mapyardDebug.session.selfId && (e.state & 2))`)
	if n := p.screenshot("tag"); n < 16 {
		t.Fatalf("the canvas shows %d colours in the arena", n)
	}
	p.walkTo(at.X+2, at.Y, 0.3, "false")
	p.wait("the game's event told in its own words", `document.getElementById("log").textContent.includes("A new player is it!")`)
	p.wait("the other player marked as it", fmt.Sprintf(`[...mapyardDebug.session.latest().values()].some((e) => e.id === %d && (e.state & 1))`, self(t, other).ID))
	if n := p.screenshot("tag-passed"); n < 16 {
		t.Fatalf("the canvas shows %d colours in the arena", n)
	}
}
