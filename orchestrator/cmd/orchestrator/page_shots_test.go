package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/docker/docker/client"

	"github.com/mapyard/mapyard/mapserver/kernel/assets/defaultset"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/edge"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// The screenshot tests compare the page's canvas with golden PNGs under
// testdata/page/, which `make goldens` rewrites (MAPYARD_UPDATE_GOLDENS=1): look at
// them before committing.
//
// What could move is kept out of the scene rather than masked: the map is the default
// map's world with no NPCs, the player is the only one on it and stands still, the
// page runs with ?still (its animation clock stopped), and only the canvas is compared:
// the panels around it carry the time of day.
//
// The tolerance: a pixel differs when one of its channels differs by more than
// shotPixelDelta (anti-aliasing and smoothing noise stay below it, and the biome tint
// lies over the tiles at 35 %), and an image matches while at most shotMaxDiffering
// pixels differ. The test measures both sides of it: the names drawn in another font
// family altogether make 188 pixels differ (AnotherFontPasses), while the smallest
// sprite of the scene missing (pebbles, one 16-pixel placeholder) makes 304 differ and
// the others 476 to 2,602 (MissingSpriteDrawsPlaceholder), and changed terrain tiles
// nearly all of them (ManifestChangeDrawnAfterReload).
const (
	shotPixelDelta    = 48
	shotMaxDiffering  = 250
	shotSpotX         = 410.0 // where the player stands, in metres: props of three biomes and an item around it
	shotSpotY         = 540.0
	shotWindowW       = 960
	shotWindowH       = 640
	goldenDir         = "testdata/page"
	updateGoldensEnv  = "MAPYARD_UPDATE_GOLDENS"
	shotCharacterName = "Ada"
)

// TestPage_Screenshots draws the page in Debian's Chromium against the edge, the real
// orchestrator and a real map container, with a fixed seed and camera, and compares the
// canvas with the golden image; then a host's asset set that changes the default set's
// grass is drawn after a reload of the page, and one that lacks the sprite of the props
// in view draws the placeholder in their place, and both images differ from the golden
// by more than the tolerance.
func TestPage_Screenshots(t *testing.T) {
	chromium := findChromium(t)
	cli := dockertest.Client(t)
	deployment := "ps-" + randomHex(t, 4)
	t.Cleanup(func() { dockertest.RemoveDeployment(t, cli, deployment) })
	shots := screenshotDir(t)
	secret := randomHex(t, 16)
	dbPath := filepath.Join(t.TempDir(), "mapyard.db")
	child := startOrchestrator(t, childEnv(deployment, "127.0.0.1:0", dbPath, secret,
		"ORCH_DEFAULT_INSTANCE_ID="+deployment, "ORCH_WARM_POOL_SIZE=0", "ORCH_CHECKPOINT_MS=200",
		"MAP_SNAPSHOT_PUSH_MS=200", "MAP_RESUME_TTL_MS=3000"))
	waitStatus(t, child.public+"/readyz", http.StatusOK, 60*time.Second)
	assetDir := t.TempDir()
	e := openShotEdge(t, child, assetDir)

	cfg := shotMap(t, deployment+"-shots")
	startMap(t, child, secret, cfg)
	key := testutil.NewAuthKey(t)
	placeCharacter(t, cli, child, secret, deployment, dbPath, e, cfg, key, shotCharacterName, shotSpotX, shotSpotY)

	ctx := browser(t, chromium)
	p := &page{t: t, ctx: ctx, shots: shots}
	p.run(chromedp.EmulateViewport(shotWindowW, shotWindowH), chromedp.Navigate(e.PublicURL()+"/?still"))
	p.started(e.PublicURL() + "/?still")
	p.exec(fmt.Sprintf(`localStorage.setItem("mapyard.authKey", %q)`, key))
	playStill(p, cfg.MapID)
	got := p.settled("map")

	t.Run("MatchesGolden", func(t *testing.T) {
		matchGolden(t, shots, "map", got)
	})

	// The names drawn in another font family (serif for system-ui) stay within the
	// tolerance: another Chromium's font rendering must not fail the test.
	t.Run("AnotherFontPasses", func(t *testing.T) {
		p := p.in(t)
		p.exec(`const v = mapyardDebug.view, label = Object.getPrototypeOf(v).label;
			v.label = function (x, y, text, colour) {
				const g = this.ctx, font = Object.getOwnPropertyDescriptor(CanvasRenderingContext2D.prototype, "font");
				Object.defineProperty(g, "font", {configurable: true, get() { return font.get.call(g); },
					set(f) { font.set.call(g, f.replace("system-ui, sans-serif", "serif")); }});
				try { label.call(this, x, y, text, colour); } finally { delete g.font; }
			}`)
		serif := p.settled("map-serif")
		p.exec(`delete mapyardDebug.view.label`)
		n, _ := imageDiff(got, serif)
		if n > shotMaxDiffering {
			t.Errorf("with the names in serif %d pixels differ from the golden, over the tolerance (%d)", n, shotMaxDiffering)
		}
		if n == 0 {
			t.Log("the names in serif look the same: this machine draws both families with one font")
		}
		t.Logf("the names in serif: %d pixels differ from the golden", n)
	})

	t.Run("ManifestChangeDrawnAfterReload", func(t *testing.T) {
		p := p.in(t)
		writeHostSet(t, assetDir, func(m map[string]any, files map[string][]byte) {
			for name, data := range files {
				if strings.HasPrefix(name, "terrain/") {
					files[name] = recolour(t, data, color.RGBA{200, 40, 40, 255})
				}
			}
		})
		e.Assets.Scan()
		p.run(chromedp.Reload())
		playStill(p, cfg.MapID)
		red := p.settled("map-red-ground")
		n, _ := imageDiff(got, red)
		if n <= shotMaxDiffering {
			t.Errorf("with other ground tiles %d pixels differ from the golden, within the tolerance (%d): a changed tile would pass", n, shotMaxDiffering)
		}
		if a, b := countPixels(got, reddish), countPixels(red, reddish); b < a+5000 {
			t.Errorf("red pixels before the reload %d, after %d: the changed tile is not drawn", a, b)
		}
		t.Logf("changed ground tiles: %d pixels differ from the golden", n)
	})

	t.Run("MissingSpriteDrawsPlaceholder", func(t *testing.T) {
		p := p.in(t)
		var kinds []string
		p.eval(`(() => { const v = mapyardDebug.view, c = mapyardDebug.session.predicted, seen = new Set();
			for (let i = 0; i + v.world.propStride <= v.props.length; i += v.world.propStride)
				if (Math.abs(v.props[i + 1] / 100 - c.x / 16) < 28 && Math.abs(v.props[i + 2] / 100 - c.y / 16) < 18)
					seen.add(v.world.propKinds[v.props[i]].name);
			return [...seen].sort(); })()`, &kinds)
		if len(kinds) == 0 {
			t.Fatal("no prop in view")
		}
		for _, kind := range kinds {
			t.Run(kind, func(t *testing.T) {
				p := p.in(t)
				writeHostSet(t, assetDir, func(m map[string]any, files map[string][]byte) {
					delete(m["props"].(map[string]any), kind)
				})
				e.Assets.Scan()
				p.run(chromedp.Reload())
				playStill(p, cfg.MapID)
				missing := p.settled("map-missing-" + kind)
				n, _ := imageDiff(got, missing)
				if n <= shotMaxDiffering {
					t.Errorf("without the %s sprite %d pixels differ from the golden, within the tolerance (%d): a missing sprite would pass", kind, n, shotMaxDiffering)
				}
				if m := countPixels(missing, magenta); m < 100 {
					t.Errorf("%d placeholder pixels drawn without the %s sprite: the props were left out", m, kind)
				}
				t.Logf("without the %s sprite: %d pixels differ from the golden, %d magenta", kind, n, countPixels(missing, magenta))
			})
		}
		if err := os.RemoveAll(filepath.Join(assetDir, "mapyard-default")); err != nil {
			t.Fatal(err)
		}
		e.Assets.Scan()
	})

	// The frame time with 200 entities in view, for the record (docs/assets.md, "Frame
	// time"): the page's own loop, its animation clock running, draws 80 NPCs in every
	// perception state, 80 named players, all walking in small circles, and 40 items
	// around the player, besides what the map sends, for frameTimeWindow.
	t.Run("FrameTime200Entities", func(t *testing.T) {
		p := p.in(t)
		p.run(chromedp.Reload())
		playStill(p, cfg.MapID)
		ft := measureFrameTime(p, 200, frameTimeWindow)
		// TAB shows the frame time in the overlay.
		p.keyDown("Tab")
		p.keyUp("Tab")
		p.wait("the overlay's frame time", `/frame time +\d+\.\d ms median · \d+\.\d p99 \(\d+ fps\)/.test(document.getElementById("overlay").textContent) &&
			/frame draw +\d+\.\d+ ms median/.test(document.getElementById("overlay").textContent)`)
		var overlay string
		p.eval(`document.getElementById("overlay").textContent.split("\n").filter((l) => l.startsWith("frame")).join(" | ")`, &overlay)
		t.Logf("overlay: %s", overlay)
		p.keyDown("Tab")
		p.keyUp("Tab")
		t.Logf("frame time with %d entities in view (%d frames in %s): interval between frames median %.1f ms, p99 %.1f ms (%.0f fps); "+
			"drawing a frame median %.2f ms, p99 %.2f ms", ft.InView, ft.Frames, frameTimeWindow, ft.IntervalMedian, ft.IntervalP99,
			1000/ft.IntervalMedian, ft.DrawMedian, ft.DrawP99)
	})
}

// frameTimeWindow is how long FrameTime200Entities measures.
const frameTimeWindow = 10 * time.Second

// frameTime is what measureFrameTime measured, in ms.
type frameTime struct {
	InView, Frames                                   int
	IntervalMedian, IntervalP99, DrawMedian, DrawP99 float64
}

// measureFrameTime has the page draw n more entities in view, walking, for d, and
// returns the median and 99th percentile of the interval between its frames and of
// the time it took to draw one (its own measure, mapyardDebug.frameMs).
func measureFrameTime(p *page, n int, d time.Duration) frameTime {
	p.t.Helper()
	p.exec(fmt.Sprintf(`const dbg = mapyardDebug, v = dbg.view, c = dbg.session.predicted, n = %d;
		v.clock = () => performance.now();
		dbg.extra = [];
		for (let i = 0; i < n; i++) {
			const k = i %% 5, e = {id: 900000 + i, kind: k < 2 ? 2 : k < 4 ? 1 : 3, state: k < 2 ? i %% 4 : 0, template: 1 + i %% 12,
				x: 0, y: 0, cx: c.x + ((i %% 20) - 9.5) * 3 * 16, cy: c.y + (Math.floor(i / 20) - 4.5) * 3.6 * 16};
			if (e.kind === 1) e.name = "P" + i;
			dbg.extra.push(e);
		}
		const m = globalThis.mapyardFrames = {at: [], draw: [], until: performance.now() + %d, done: false};
		const step = (now) => {
			m.at.push(now);
			m.draw.push(dbg.frameMs);
			for (const e of dbg.extra) {
				const a = e.kind === 3 ? 0 : now / 1000 * 1.5 + e.id;
				e.x = e.cx + Math.cos(a) * 16; e.y = e.cy + Math.sin(a) * 16;
			}
			if (now < m.until) requestAnimationFrame(step);
			else { m.done = true; dbg.extra = []; }
		};
		requestAnimationFrame(step)`, n, d.Milliseconds()))
	time.Sleep(d / 2)
	p.canvas("frame-time")
	p.waitWithin("the measurement", d+30*time.Second, `globalThis.mapyardFrames.done`)
	var ft frameTime
	p.eval(`(() => {
		const m = globalThis.mapyardFrames, q = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
		const iv = m.at.slice(1).map((t, i) => t - m.at[i]), draw = m.draw.slice(1);
		return {frames: draw.length, intervalMedian: q(iv, 0.5), intervalP99: q(iv, 0.99), drawMedian: q(draw, 0.5), drawP99: q(draw, 0.99)};
	})()`, &ft)
	ft.InView = n
	p.exec(`mapyardDebug.view.clock = () => 0`)
	return ft
}

// openShotEdge opens an edge in front of child serving the page built from this
// checkout and the host's asset sets in dir, which the test scans by hand.
func openShotEdge(t *testing.T, child *childOrchestrator, dir string) *edge.Edge {
	t.Helper()
	cfg := testEdgeConfig("127.0.0.1:0", child.control, child.edgeCredential)
	cfg.AssetDir, cfg.AssetPollMS = dir, 3_600_000
	e, err := edge.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	e.Static = pageFiles(t)
	if err := e.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	waitStatus(t, e.PublicURL()+"/readyz", http.StatusOK, 30*time.Second)
	return e
}

// shotMap is the default map's world as map id: the same seed, terrain and props, no
// NPCs, and items dense enough that some lie in view.
func shotMap(t *testing.T, id string) mapgen.MapConfig {
	t.Helper()
	c, err := mapgen.Template(mapgen.DefaultMapID)
	if err != nil {
		t.Fatal(err)
	}
	c.MapID, c.InstanceID = id, mapgen.InstanceOfMap(id)
	c.GenerationRules.NPCDensity = 0
	c.GenerationRules.InteractableDensity = 100
	return c
}

// startMap creates cfg's map through the admin API and waits until it is ready.
func startMap(t *testing.T, child *childOrchestrator, secret string, cfg mapgen.MapConfig) {
	t.Helper()
	postMap(t, child.control, secret, cfg)
	waitInstance(t, child.control, secret, cfg.InstanceID, orchestrator.StateReady, 120*time.Second)
}

// placeCharacter creates a character named name for key and saves it standing at (x,
// y) metres on cfg's map (brought there by a Go client that then leaves), so that the
// page playing key plays it there.
func placeCharacter(t *testing.T, cli *client.Client, child *childOrchestrator, secret, deployment, dbPath string, e *edge.Edge,
	cfg mapgen.MapConfig, key, name string, x, y float64) string {
	t.Helper()
	testutil.CharacterAPI{Base: child.public}.Create(t, key, name)
	mapCred, _ := credentialsOf(t, inspect(t, cli, waitInstance(t, child.control, secret, deployment, orchestrator.StateReady, 120*time.Second).ContainerID), secret)
	c := enterAtAs(t, child, mapCred, "ws"+strings.TrimPrefix(e.PublicURL(), "http"), cfg, x, y, key)
	id := c.Welcome().CharacterID
	c.Close()
	waitUntil(t, "the character saved on "+cfg.MapID, func() bool {
		st := savedState(t, dbPath, id)
		return st != nil && st.InstanceID == cfg.InstanceID
	})
	return id
}

// playStill plays the key's character from the menu on mapID and waits until the
// canvas shows a settled scene: the sets' images loaded and two frames a moment apart
// the same.
func playStill(p *page, mapID string) {
	p.t.Helper()
	p.wait("the menu", `mapyardDebug.state === "menu"`)
	p.run(chromedp.Click(chromedp.CSS("#play")))
	p.wait("playing on "+mapID, fmt.Sprintf(`mapyardDebug.state === "playing" && mapyardDebug.session.welcome.mapId === %q &&
		mapyardDebug.session.predicted !== null && mapyardDebug.session.server !== null`, mapID))
	p.wait("the asset sets' images loaded", `mapyardDebug.view.sprites.key !== "" && [...mapyardDebug.view.sprites.images.values()].every((i) => i.complete)`)
	p.wait("the prediction settled on the server's position", `mapyardDebug.session.predicted.x === mapyardDebug.session.server.x &&
		mapyardDebug.session.predicted.y === mapyardDebug.session.server.y && Math.abs(mapyardDebug.session.correction.x) + Math.abs(mapyardDebug.session.correction.y) < 0.01`)
	p.settled("")
}

// settled waits until two frames a moment apart are the same, and returns the canvas
// saved as name.png (nothing when name is empty).
func (p *page) settled(name string) image.Image {
	p.t.Helper()
	prev := ""
	for i := 0; i < 40; i++ {
		var url string
		p.eval(`document.getElementById("view").toDataURL("image/png")`, &url)
		if url == prev {
			if name == "" {
				return nil
			}
			return p.canvas(name)
		}
		prev = url
		time.Sleep(300 * time.Millisecond)
	}
	p.t.Fatal("the canvas kept changing for 12 s: something in the scene moves")
	return nil
}

// canvas returns the page's canvas as an image, saved as name.png.
func (p *page) canvas(name string) image.Image {
	p.t.Helper()
	var url string
	p.eval(`document.getElementById("view").toDataURL("image/png")`, &url)
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(url, "data:image/png;base64,"))
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.shots, name+".png"), raw, 0o644); err != nil {
		p.t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		p.t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != shotWindowW || b.Dy() != shotWindowH {
		p.t.Fatalf("the canvas is %dx%d, want %dx%d", b.Dx(), b.Dy(), shotWindowW, shotWindowH)
	}
	return img
}

// matchGolden compares got with the golden name.png, or writes it there when
// MAPYARD_UPDATE_GOLDENS is set. A mismatch saves the differing pixels as
// name-diff.png beside the screenshots.
func matchGolden(t *testing.T, shots, name string, got image.Image) {
	t.Helper()
	path := filepath.Join(goldenDir, name+".png")
	if os.Getenv(updateGoldensEnv) != "" {
		var buf bytes.Buffer
		if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, got); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("golden %s written (%d bytes): look at it before committing", path, buf.Len())
		return
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (make goldens writes it)", err)
	}
	want, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	n, diff := imageDiff(want, got)
	t.Logf("%s: %d pixels differ from the golden (tolerance %d)", name, n, shotMaxDiffering)
	if n > shotMaxDiffering {
		var buf bytes.Buffer
		_ = png.Encode(&buf, diff)
		out := filepath.Join(shots, name+"-diff.png")
		_ = os.WriteFile(out, buf.Bytes(), 0o644)
		t.Fatalf("%s: %d pixels differ from %s by more than %d in a channel (tolerance %d); the differing pixels are in %s, "+
			"and make goldens rewrites the golden if the change is meant", name, n, path, shotPixelDelta, shotMaxDiffering, out)
	}
}

// imageDiff counts the pixels of a and b that differ by more than shotPixelDelta in a
// channel, and draws them red over a faded a.
func imageDiff(a, b image.Image) (int, *image.RGBA) {
	r := a.Bounds()
	diff := image.NewRGBA(r)
	n := 0
	if b.Bounds() != r {
		return r.Dx() * r.Dy(), diff
	}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			ar, ag, ab, _ := a.At(x, y).RGBA()
			br, bg, bb, _ := b.At(x, y).RGBA()
			d := max(absDiff(ar, br), absDiff(ag, bg), absDiff(ab, bb)) >> 8
			if d > shotPixelDelta {
				n++
				diff.Set(x, y, color.RGBA{255, 0, 0, 255})
			} else {
				diff.Set(x, y, color.RGBA{uint8(ar >> 10), uint8(ag >> 10), uint8(ab >> 10), 255})
			}
		}
	}
	return n, diff
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}

// countPixels is the number of pixels of img for which is holds.
func countPixels(img image.Image, is func(r, g, b uint32) bool) int {
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if is(r>>8, g>>8, b>>8) {
				n++
			}
		}
	}
	return n
}

func magenta(r, g, b uint32) bool { return r > 200 && g < 60 && b > 200 }
func reddish(r, g, b uint32) bool { return r > 120 && r > 2*g && r > 2*b }

// writeHostSet writes the default set into dir/mapyard-default (a host's set with the
// built-in set's id and version replaces it), after edit changed its manifest or its
// files; the manifest lists every file with its new size and hash.
func writeHostSet(t *testing.T, dir string, edit func(manifest map[string]any, files map[string][]byte)) {
	t.Helper()
	src := defaultset.FS()
	files := map[string][]byte{}
	err := fs.WalkDir(src, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || name == "manifest.json" {
			return err
		}
		files[name], err = fs.ReadFile(src, name)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := fs.ReadFile(src, "manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	edit(m, files)
	var listed []any
	for _, f := range m["files"].([]any) {
		f := f.(map[string]any)
		data := files[f["path"].(string)]
		sum := sha256.Sum256(data)
		f["sha256"], f["size"] = hex.EncodeToString(sum[:]), len(data)
		listed = append(listed, f)
	}
	m["files"] = listed
	root := filepath.Join(dir, "mapyard-default")
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "manifest.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// recolour returns the PNG raw with every opaque pixel tinted towards c.
func recolour(t *testing.T, raw []byte, c color.RGBA) []byte {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	out := image.NewNRGBA(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			lum := (r + g + bl) / 3 >> 8
			out.Set(x, y, color.NRGBA{uint8((uint32(c.R) + lum) / 2), uint8((uint32(c.G) + lum/4) / 2), uint8((uint32(c.B) + lum/4) / 2), uint8(a >> 8)})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, out); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
