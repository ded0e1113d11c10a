package main

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mapyard/mapyard/mapserver/itemgen"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// readmeShotsEnv names the directory TestPage_ReadmeScreenshots writes README's
// screenshots to (`make readme-shots` sets it to docs/img).
const readmeShotsEnv = "MAPYARD_README_SHOTS"

// readmeSpotX and readmeSpotY are where README's player stands, in metres (beside the
// item nearest to it): desert, beach, ruined walls and palms on the default map.
const (
	readmeSpotX = 220.0
	readmeSpotY = 1190.0
)

// TestPage_ReadmeScreenshots draws README's three screenshots from the real page in
// Chromium against the edge, the orchestrator and a map container: the menu, the
// default map's world with other players and NPCs, and the inventory after picking
// items up. The map is the default map's (same seed, terrain, props and portals, as
// map id default) with NPCs and items denser than the default, so that a screen shows
// some; the other players are Go clients standing near the page's player. It is a tool,
// not a check: without MAPYARD_README_SHOTS it skips.
func TestPage_ReadmeScreenshots(t *testing.T) {
	dir := os.Getenv(readmeShotsEnv)
	if dir == "" {
		t.Skip(readmeShotsEnv + " is not set: `make readme-shots` draws README's screenshots")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	chromium := findChromium(t)
	cli := dockertest.Client(t)
	deployment := "pr-" + randomHex(t, 4)
	t.Cleanup(func() { dockertest.RemoveDeployment(t, cli, deployment) })
	secret := randomHex(t, 16)
	dbPath := filepath.Join(t.TempDir(), "mapyard.db")
	// The kit's first map is another one here: the map id default is the map below.
	child := startOrchestrator(t, childEnv(deployment, "127.0.0.1:0", dbPath, secret,
		"ORCH_DEFAULT_INSTANCE_ID="+deployment, "ORCH_DEFAULT_MAP_ID=frontier", "ORCH_WARM_POOL_SIZE=0",
		"ORCH_CHECKPOINT_MS=200", "MAP_SNAPSHOT_PUSH_MS=200", "MAP_RESUME_TTL_MS=3000"))
	waitStatus(t, child.public+"/readyz", http.StatusOK, 60*time.Second)
	e := openShotEdge(t, child, "")

	cfg, err := mapgen.Template(mapgen.DefaultMapID)
	if err != nil {
		t.Fatal(err)
	}
	cfg.GenerationRules.NPCDensity = 1500
	cfg.GenerationRules.InteractableDensity = 600
	startMap(t, child, secret, cfg)
	near := itemsNear(t, cfg, readmeSpotX, readmeSpotY, 3)

	// The page's player beside the first item, three others around it.
	key := testutil.NewAuthKey(t)
	x0, y0 := float64(near[0].Place.X)/100-1.5, float64(near[0].Place.Y)/100
	placeCharacter(t, cli, child, secret, deployment, dbPath, e, cfg, key, "Ada", x0, y0)
	mapCred, _ := credentialsOf(t, inspect(t, cli, getInstance(t, child.control, secret, deployment).ContainerID), secret)
	for i, name := range []string{"Bram", "Cleo", "Dev"} {
		k := testutil.NewAuthKey(t)
		testutil.CharacterAPI{Base: child.public}.Create(t, k, name)
		a := 2 * math.Pi * float64(i) / 3
		enterAtAs(t, child, mapCred, "ws"+strings.TrimPrefix(e.PublicURL(), "http"), cfg, x0+5*math.Cos(a)+1, y0+3.5*math.Sin(a), k)
	}

	ctx := browser(t, chromium)
	p := &page{t: t, ctx: ctx, shots: screenshotDir(t)} // a failure's screenshot goes there, not into dir
	save := func(name string) {
		p.screenshot(name)
		raw, err := os.ReadFile(filepath.Join(p.shots, name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p.run(chromedp.EmulateViewport(shotWindowW, shotWindowH), chromedp.Navigate(e.PublicURL()+"/"))
	p.started(e.PublicURL() + "/")
	p.exec(fmt.Sprintf(`localStorage.setItem("mapyard.authKey", %q)`, key))
	p.run(chromedp.Reload())
	p.wait("the menu listing Ada", `mapyardDebug.state === "menu" && document.querySelectorAll("#characters li").length === 1`)
	save("menu")

	p.run(chromedp.Click(chromedp.CSS("#play")))
	p.wait("playing on the default map", `mapyardDebug.state === "playing" && mapyardDebug.session.welcome.mapId === "default" &&
		mapyardDebug.session.predicted !== null`)
	p.wait("the asset sets' images loaded", `[...mapyardDebug.view.sprites.images.values()].every((i) => i.complete)`)
	p.wait("the other players named", `[...mapyardDebug.session.latest().values()].filter((e) => e.kind === 1 && mapyardDebug.names.of(e.id)).length >= 3`)
	onScreen := `(() => { const c = mapyardDebug.session.predicted;
		return [...mapyardDebug.session.latest().values()].filter((e) => e.kind === 2 &&
			Math.abs(e.x - c.x) < 26 * 16 && Math.abs(e.y - c.y) < 16 * 16).length; })()`
	p.waitWithin("NPCs on screen", 5*time.Minute, onScreen+" >= 2")
	time.Sleep(time.Second) // names above heads and walking frames drawn
	save("map")

	for _, it := range near {
		p.walkTo(float64(it.Place.X)/100, float64(it.Place.Y)/100, 0.5, "false")
		p.pickUp(it.ID)
	}
	p.inventoryShows(near[len(near)-1].ID)
	save("inventory")
	t.Logf("README's screenshots are in %s", dir)
}

// itemsNear returns the n items cfg's generator places nearest to (x, y) metres.
func itemsNear(t *testing.T, cfg mapgen.MapConfig, x, y float64, n int) []items.Item {
	t.Helper()
	w, err := mapgen.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	all := itemgen.Generate(cfg, w, sim.NewColliders(w), items.DefaultCatalog())
	dist := func(it items.Item) float64 { return math.Hypot(float64(it.Place.X)/100-x, float64(it.Place.Y)/100-y) }
	slices.SortFunc(all, func(a, b items.Item) int { return int(dist(a)*100) - int(dist(b)*100) })
	if len(all) < n {
		t.Fatalf("map %s places %d items", cfg.MapID, len(all))
	}
	return all[:n]
}
