package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	dockerclient "github.com/docker/docker/client"
	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/docs/schemas"
	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// The Node.js example map (mapserver/examples/node) is a map in another language,
// written from docs/map-contract.md and docs/netcode.md: these tests hold it to the
// kit's own code (world, movement, snapshot bytes) and play it through a real kit.

// nodeMapEnv names the image of the example the tests start; `make test` builds it
// (make node-map-image) and sets it. Unset, the test builds one itself with
// scripts/node-map-image.sh under a tag of its own, removed afterwards.
const nodeMapEnv = "MAPYARD_TEST_NODE_IMAGE"

// TestNodeMap_MatchesTheKitsWorldMovementAndSnapshots runs the example's self-test
// under node: the world of every vector in docs/world-vectors has the vector's hash,
// the example's movement lands every step of random walks (into walls, water and the
// bounds) exactly where the page's module predicts, and its snapshot encoder writes
// docs/netcode.md's example byte for byte. No Docker needed.
func TestNodeMap_MatchesTheKitsWorldMovementAndSnapshots(t *testing.T) {
	node := nodeBinary(t)
	root := testutil.ModuleRoot(t)
	vectors, err := filepath.Glob(filepath.Join(root, "docs", "world-vectors", "*.json"))
	if err != nil || len(vectors) == 0 {
		t.Fatalf("no world vectors: %v", err)
	}
	args := append([]string{filepath.Join(root, "mapserver", "examples", "node", "selftest.js"), nodeModule(t)}, vectors...)
	out, err := exec.Command(node, args...).Output()
	var got struct {
		Steps, Blocked int
		Failures       []string
	}
	if jerr := json.Unmarshal(out, &got); jerr != nil {
		t.Fatalf("selftest: %v, printed %q (%v)", err, out, jerr)
	}
	for _, f := range got.Failures {
		t.Error(f)
	}
	if err != nil || got.Steps == 0 || got.Blocked == 0 {
		t.Fatalf("selftest: %v after %d steps, %d of them blocked (it must walk into something)", err, got.Steps, got.Blocked)
	}
}

// TestNodeMap_PlaysThroughTheKit creates a map of the example's image through the admin
// API of a real kit, plays it through the edge with the Go client, and checks what the
// contract asks of any map: the container's user and read-only root, the welcome
// (world hash, config, transfer), movement, pushes reaching the orchestrator, a portal
// to the kit's own map, and a clean stop that pushes every character and exits 0.
func TestNodeMap_PlaysThroughTheKit(t *testing.T) {
	image := nodeMapImage(t, dockertest.Client(t))
	k := newKit(t, "ORCH_MAP_IMAGES="+image, "ORCH_CHECKPOINT_MS=200", "MAP_SNAPSHOT_PUSH_MS=1000")
	cfg := smallMap(t, k.deployment+"-node")
	cfg.GenerationRules.Portals = []mapgen.PortalRule{{TargetMapID: mapgen.DefaultMapID, Count: 1}}
	k.createMapOfImage(t, cfg, image)
	w := generate(t, cfg)
	portal := w.Portals[0]
	// Players start at the centre, or a quarter of the way in when the portal is near
	// it, and walk away from the portal.
	sx, sy := 200.0, 200.0
	if math.Hypot(float64(portal.X)/100-sx, float64(portal.Y)/100-sy) < 40 {
		sx, sy = 100, 100
	}
	away := math.Atan2(sy-float64(portal.Y)/100, sx-float64(portal.X)/100)
	dx, dy := int(math.Round(127*math.Cos(away))), int(math.Round(127*math.Sin(away)))

	t.Run("RunsAsTheContractSays", func(t *testing.T) {
		inst := k.instance(t, cfg.InstanceID)
		info := inspect(t, k.cli, inst.ContainerID)
		if inst.Image != image || info.Config.Image != image || !info.HostConfig.ReadonlyRootfs {
			t.Fatalf("%s runs %q (admin: %q), read-only root %v; want %s on a read-only root", cfg.InstanceID, info.Config.Image, inst.Image, info.HostConfig.ReadonlyRootfs, image)
		}
		uids := processUIDs(t, k.cli, inst.ContainerID)
		for _, uid := range uids {
			if uid != "10001" {
				t.Fatalf("the container's processes run as %v, want 10001", uids)
			}
		}
		if len(uids) == 0 {
			t.Fatal("docker top shows no process")
		}
	})

	const carried = `{"gold":12,"studio":{"quest":"intro"}}`
	c := k.enterAtAs(t, testutil.NewAuthKey(t), cfg, sx, sy, carried, client.Options{})
	wel := c.Welcome()

	t.Run("WelcomesWithTheWorldAndCompletesTheTransfer", func(t *testing.T) {
		if wel.InstanceID != cfg.InstanceID || wel.MapID != cfg.MapID || wel.WorldHash != w.Hash() || wel.TransferID == "" ||
			wel.Epoch < 1 || wel.SnapshotFormat != 2 || wel.TickHz != 30 || wel.SnapshotHz != 15 {
			t.Fatalf("welcome %+v, want %s of %s, world %s, a transfer id, an epoch, format 2 at 30/15 Hz", wel, cfg.InstanceID, cfg.MapID, w.Hash())
		}
		if !reflect.DeepEqual(wel.MapConfig, cfg) {
			t.Fatalf("welcome config %+v, want the one the map was created with %+v", wel.MapConfig, cfg)
		}
		waitUntil(t, "the transfer completed by the map's report", func() bool {
			return transferState(t, k.dbPath, wel.CharacterID) == "completed"
		})
	})

	t.Run("WalksAsTheModulePredicts", func(t *testing.T) {
		x, y := walkInputs(t, c, dx, dy, 30)
		inputs := make([]sim.Input, 30)
		for i := range inputs {
			inputs[i] = sim.Input{Seq: uint64(i + 1), DX: int8(dx), DY: int8(dy)}
		}
		want, _ := sim.Replay(sim.NewColliders(w), sim.Vec{X: int32(math.Round(sx * 16)), Y: int32(math.Round(sy * 16))}, sim.Stride{}, inputs, sim.DefaultPlayerSpeed, 30)
		if x != want.X || y != want.Y {
			t.Fatalf("after 30 inputs (%d, %d) the map shows (%d, %d), the kit's movement (%d, %d)", dx, dy, x, y, want.X, want.Y)
		}
	})

	t.Run("PushesReachTheOrchestrator", func(t *testing.T) {
		e, _ := c.State().SelfEntity()
		waitFor(t, "the map's push of the character where it stands", 10*time.Second, func() bool {
			st := savedState(t, k.dbPath, wel.CharacterID)
			return st != nil && st.InstanceID == cfg.InstanceID && st.X == float64(e.X)/16 && st.Y == float64(e.Y)/16
		})
		if st := savedState(t, k.dbPath, wel.CharacterID); !sameJSON(t, st.Attributes, carried) {
			t.Fatalf("pushed attributes %s, want those it arrived with, %s", st.Attributes, carried)
		}
	})

	t.Run("RefusesForgedAndUsedTickets", func(t *testing.T) {
		j := k.join(t, fmt.Sprintf(`{"authKey":%q}`, testutil.NewAuthKey(t)))
		a := transferAt(t, k.orch.control, k.mapCred(t, j.InstanceID), j, cfg.MapID, sx, sy, `{}`)
		k.play(t, a.WS, a.Token, client.Options{})
		for _, tc := range []struct{ ticket, code string }{{a.Token, "ticket_used"}, {"forged.c2lnbmF0dXJl", "ticket_invalid"}} {
			_, err := client.Dial(context.Background(), k.ws+a.WS, client.Hello{Ticket: tc.ticket}, client.Options{})
			var se *client.ServerError
			if !errors.As(err, &se) || se.Code != tc.code {
				t.Fatalf("hello with %s: %v, want %s", tc.code, err, tc.code)
			}
		}
	})

	t.Run("MessagesMatchTheSchemas", func(t *testing.T) {
		set, err := schemas.Load()
		if err != nil {
			t.Fatal(err)
		}
		valid := func(name string, doc []byte) {
			t.Helper()
			if err := set.Validate(name, doc); err != nil {
				t.Fatalf("%s\n%s", err, doc)
			}
		}
		// The control listener, with the orchestrator's credential and without it.
		inst := k.instance(t, cfg.InstanceID)
		_, orchCred := credentialsOf(t, inspect(t, k.cli, inst.ContainerID), k.secret)
		health := fmt.Sprintf("http://127.0.0.1:%d/health", inst.ControlPort)
		var h json.RawMessage
		testutil.GetJSON(t, health, orchCred, http.StatusOK, &h)
		valid("control/health.answer.json", h)
		for _, cred := range []string{"", orchCred + "x"} {
			var e json.RawMessage
			testutil.GetJSON(t, health, cred, http.StatusUnauthorized, &e)
			valid(schemas.ErrorAnswer, e)
		}

		// A player's connection, frame by frame.
		j := k.join(t, fmt.Sprintf(`{"authKey":%q}`, testutil.NewAuthKey(t)))
		a := transferAt(t, k.orch.control, k.mapCred(t, j.InstanceID), j, cfg.MapID, sx, sy, `{}`)
		ws, _, err := websocket.DefaultDialer.Dial(k.ws+a.WS, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		exchange := func(typ int, msg, schema, kind string) []byte {
			t.Helper()
			if err := ws.WriteMessage(typ, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
			for {
				typ, data, err := ws.ReadMessage()
				if err != nil {
					t.Fatalf("after %s: %v", msg, err)
				}
				if typ == websocket.TextMessage && strings.Contains(string(data), `"kind":"`+kind+`"`) {
					valid(schema, data)
					valid("player/from-map.json", data)
					return data
				}
			}
		}
		exchange(websocket.TextMessage, fmt.Sprintf(`{"v":1,"kind":"hello","ticket":%q,"formats":[2]}`, a.Token), "player/welcome.json", "welcome")
		if pong := exchange(websocket.TextMessage, `{"v":1,"kind":"ping","t":12.5}`, "player/pong.json", "pong"); !strings.Contains(string(pong), `"t":12.5`) {
			t.Fatalf("pong %s, want the ping's t", pong)
		}
		self, _ := c.State().SelfEntity()
		names := exchange(websocket.TextMessage, fmt.Sprintf(`{"v":1,"kind":"command","seq":1,"feature":"players","action":"names","payload":{"ids":[%d,999999]}}`, self.ID),
			"player/event.json", "event")
		if !strings.Contains(string(names), `"characterId":"`+wel.CharacterID+`"`) || strings.Contains(string(names), "999999") {
			t.Fatalf("names %s, want the first player's alone", names)
		}
		for _, m := range []struct {
			typ       int
			msg, code string
		}{
			{websocket.TextMessage, `{"v":1,"kind":"command","seq":2,"feature":"dance","action":"now","payload":{}}`, "unknown_command"},
			{websocket.TextMessage, `{"v":1,"kind":"command","seq":3,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":1,"dx":300,"dy":0}]}}`, "bad_direction"},
			{websocket.TextMessage, `{"v":1,"kind":"hello","ticket":"again"}`, "bad_request"},
			{websocket.BinaryMessage, `{}`, "bad_request"},
			{websocket.TextMessage, `not json`, "bad_request"},
		} {
			if e := exchange(m.typ, m.msg, "player/error.json", "error"); !strings.Contains(string(e), `"code":"`+m.code+`"`) {
				t.Fatalf("%s answered %s, want %s", m.msg, e, m.code)
			}
		}
	})

	t.Run("PortalLeadsToTheKitsMap", func(t *testing.T) {
		x, y := float64(portal.X-portal.Radius)/100-1, float64(portal.Y)/100
		p := k.enterAtAs(t, testutil.NewAuthKey(t), cfg, x, y, carried, client.Options{})
		character := p.Welcome().CharacterID
		got := walkThrough(t, p, portal, mapgen.DefaultMapID)
		if got.InstanceID != k.def || got.CharacterID != character {
			t.Fatalf("arrived as %+v, want %s on %s", got, character, k.def)
		}
		waitUntil(t, "the default map's push of the character", func() bool {
			st := savedState(t, k.dbPath, character)
			return st != nil && st.InstanceID == k.def && sameJSON(t, st.Attributes, carried)
		})
	})

	t.Run("StopClosesPushesAndExitsZero", func(t *testing.T) {
		x, y := walkInputs(t, c, dx, dy, 15)
		before := time.Now().UnixMicro()
		testutil.PostJSON(t, k.orch.control+httpapi.PathAdminMaps+"/"+cfg.InstanceID+"/stop", k.secret, ``, http.StatusOK, nil)
		select {
		case <-c.Done():
		case <-time.After(15 * time.Second):
			t.Fatal("the player's connection outlived the stop")
		}
		if code := closeCode(c); code != 1001 {
			t.Fatalf("closed with %d, want 1001", code)
		}
		waitUntil(t, fmt.Sprintf("the push on stop: (%g, %g) at a revision after the stop was asked", float64(x)/16, float64(y)/16), func() bool {
			st := savedState(t, k.dbPath, wel.CharacterID)
			return st != nil && st.X == float64(x)/16 && st.Y == float64(y)/16 && savedRevision(t, k.dbPath, wel.CharacterID) > before
		})
		inst := waitInstance(t, k.orch.control, k.secret, cfg.InstanceID, orchestrator.StateStopped, 20*time.Second)
		if inst.Restarts != 0 || inst.LastExitCode == nil || *inst.LastExitCode != 0 {
			t.Fatalf("stopped as %+v, want exit 0 and no restart", inst)
		}
	})
}

// TestNodeMap_DefaultMapRestartedAndAdopted runs a kit whose default map is the example's image
// with a warm pool of it: a guest joins through the edge with a join ticket and walks as
// the kit's movement predicts; the pool keeps a blank spare of the image (registered
// under its pool id); after the map's container is killed the orchestrator restarts the
// map on that spare, which takes on the instance, registers as it and admits the next
// guest; after the orchestrator is killed and started again, the new one adopts the
// running map, which registers again when its heartbeat is answered registered: false.
func TestNodeMap_DefaultMapRestartedAndAdopted(t *testing.T) {
	image := nodeMapImage(t, dockertest.Client(t))
	k := newKit(t, "ORCH_MAP_IMAGE="+image, "ORCH_WARM_POOL_SIZE=1")
	guestWalks := func(t *testing.T) {
		j := k.join(t, `{}`)
		c := k.play(t, j.WS, j.Ticket, client.Options{})
		wel := c.Welcome()
		if wel.InstanceID != k.def || wel.MapID != mapgen.DefaultMapID || wel.TransferID != "" || !strings.HasPrefix(wel.Name, "Guest") {
			t.Fatalf("welcome %+v, want a guest joined on %s", wel, k.def)
		}
		start, _ := c.State().SelfEntity()
		x, y := walkInputs(t, c, 127, 40, 20)
		inputs := make([]sim.Input, 20)
		for i := range inputs {
			inputs[i] = sim.Input{Seq: uint64(i + 1), DX: 127, DY: 40}
		}
		want, _ := sim.Replay(sim.NewColliders(generate(t, wel.MapConfig)), sim.Vec{X: start.X, Y: start.Y}, sim.Stride{}, inputs, sim.DefaultPlayerSpeed, 30)
		if x != want.X || y != want.Y {
			t.Fatalf("from (%d, %d) the map walked the guest to (%d, %d), the kit's movement to (%d, %d)", start.X, start.Y, x, y, want.X, want.Y)
		}
	}
	t.Run("GuestJoinsAndWalks", guestWalks)

	t.Run("RestartedOnAPoolSpare", func(t *testing.T) {
		waitMetric(t, k.orch.control, k.secret, fmt.Sprintf(`mapyard_warm_pool_ready_by_image{image=%q} 1`, image), 60*time.Second)
		crashed := k.instance(t, k.def)
		if err := k.cli.ContainerKill(context.Background(), crashed.ContainerID, "KILL"); err != nil {
			t.Fatal(err)
		}
		var inst orchestrator.Instance
		waitFor(t, "the map restarted in another container", 60*time.Second, func() bool {
			inst = k.instance(t, k.def)
			return inst.State == orchestrator.StateReady && inst.ContainerID != crashed.ContainerID && inst.Restarts == 1
		})
		if pool := inspect(t, k.cli, inst.ContainerID).Config.Labels[docker.LabelPool]; pool == "" {
			t.Fatalf("restarted in %s, which is not a pool spare", inst.ContainerID)
		}
		guestWalks(t)
	})

	t.Run("AdoptedAfterAnOrchestratorRestart", func(t *testing.T) {
		before := k.instance(t, k.def)
		if err := k.orch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = k.orch.wait(10 * time.Second)
		k.restart(t)
		waitFor(t, "the map registered again with the new orchestrator", 30*time.Second, func() bool {
			inst := k.instance(t, k.def)
			return inst.State == orchestrator.StateReady && inst.Registered
		})
		if inst := k.instance(t, k.def); inst.ContainerID != before.ContainerID || inst.Restarts != before.Restarts {
			t.Fatalf("after the restart %+v, want the same container %s adopted, no restart", inst, before.ContainerID)
		}
		guestWalks(t)
	})
}

// walkInputs sends n movement inputs (dx, dy) at the tick rate and waits until a
// snapshot shows the last one applied; it returns the player's position then, in quanta.
func walkInputs(t *testing.T, c *client.Client, dx, dy, n int) (x, y int32) {
	t.Helper()
	tick := time.NewTicker(time.Second / 30)
	defer tick.Stop()
	var last uint64
	for range n {
		<-tick.C
		seq, err := c.Move(dx, dy)
		if err != nil {
			t.Fatal(err)
		}
		last = seq
	}
	var e, ok = c.State().SelfEntity()
	waitUntil(t, fmt.Sprintf("a snapshot applying input %d", last), func() bool {
		m := c.State()
		e, ok = m.SelfEntity()
		return ok && m.Seq >= last
	})
	return e.X, e.Y
}

// closeCode is the close code of the connection's end, from its events.
func closeCode(c *client.Client) int {
	for {
		select {
		case e := <-c.Events():
			if e.Kind == "closed" {
				return e.Close
			}
		default:
			return -1
		}
	}
}

// processUIDs lists the user of every process in the container, as docker top shows.
func processUIDs(t *testing.T, cli *dockerclient.Client, id string) []string {
	t.Helper()
	top, err := cli.ContainerTop(context.Background(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	col := -1
	for i, title := range top.Titles {
		if title == "UID" {
			col = i
		}
	}
	if col < 0 {
		t.Fatalf("docker top shows no UID column: %v", top.Titles)
	}
	var uids []string
	for _, p := range top.Processes {
		uids = append(uids, p[col])
	}
	return uids
}

// transferState is the state of the character's newest transfer in the orchestrator's
// database.
func transferState(t *testing.T, dbPath, characterID string) string {
	t.Helper()
	var st string
	_ = readDB(t, dbPath).QueryRow(`SELECT state FROM transfers WHERE character_id = ? ORDER BY created_at_ms DESC LIMIT 1`, characterID).Scan(&st)
	return st
}

// savedRevision is the revision of the character's saved state (0 when none).
func savedRevision(t *testing.T, dbPath, characterID string) int64 {
	t.Helper()
	var rev int64
	_ = readDB(t, dbPath).QueryRow(`SELECT revision FROM character_state WHERE character_id = ?`, characterID).Scan(&rev)
	return rev
}

// nodeBinary is node's path, or the test is unavailable.
func nodeBinary(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.Unavailable(t, "node not in PATH: the Node.js example map needs it")
	}
	return node
}

// nodeModule builds the page's WebAssembly module from this checkout into a directory
// of the test's own, beside the wasm_exec.js of the Go that built it, as the example
// loads them.
func nodeModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "mapyard.wasm"), "./mapserver/cmd/client-wasm")
	build.Dir = testutil.ModuleRoot(t)
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the module: %v\n%s", err, out)
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(goroot)), "lib", "wasm", "wasm_exec.js"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wasm_exec.js"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// nodeMapImage is the example's image: $MAPYARD_TEST_NODE_IMAGE, or one built now by
// the documented recipe (scripts/node-map-image.sh) with this checkout's module.
func nodeMapImage(t *testing.T, cli *dockerclient.Client) string {
	t.Helper()
	if img := os.Getenv(nodeMapEnv); img != "" {
		return img
	}
	nodeBinary(t)
	tag := "mapyard/node-map:test-" + randomHex(t, 4)
	cmd := exec.Command(filepath.Join("scripts", "node-map-image.sh"), tag)
	cmd.Dir = testutil.ModuleRoot(t)
	cmd.Env = append(os.Environ(), "WASM_DIR="+nodeModule(t), "VERSION=test")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/node-map-image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { dockertest.UntagImage(t, cli, tag) })
	return tag
}
