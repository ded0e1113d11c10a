package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dockerclient "github.com/docker/docker/client"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/edge"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// kit is one mapyard host as compose runs it: the real orchestrator (a child process
// with its own SQLite file and a control port that stays the same across restarts),
// the edge in front of it with its own credential, and real map containers on the
// Docker engine, all labelled with the kit's own deployment and removed after the test.
type kit struct {
	cli        *dockerclient.Client
	deployment string
	secret     string
	dbPath     string
	env        []string
	orch       *childOrchestrator
	edge       *edge.Edge
	// def is the instance id of the default map, where joins land.
	def string
	// ws is the edge's WebSocket origin (ws://127.0.0.1:port).
	ws string
}

// newKit starts a kit and waits until its default map is ready and the edge has the
// route table. extra adds orchestrator (ORCH_*) and map (MAP_*) variables; the default
// instance is <deployment>-d unless extra sets ORCH_DEFAULT_INSTANCE_ID.
func newKit(t *testing.T, extra ...string) *kit {
	t.Helper()
	k := &kit{cli: dockertest.Client(t), deployment: "s0-" + randomHex(t, 4), secret: randomHex(t, 16)}
	k.def = k.deployment + "-d"
	k.dbPath = filepath.Join(t.TempDir(), "mapyard.db")
	for _, kv := range extra { // a test may pick the default instance or the database itself
		if id, ok := strings.CutPrefix(kv, "ORCH_DEFAULT_INSTANCE_ID="); ok {
			k.def = id
		}
		if p, ok := strings.CutPrefix(kv, "ORCH_DB_PATH="); ok {
			k.dbPath = p
		}
	}
	t.Cleanup(func() { dockertest.RemoveDeployment(t, k.cli, k.deployment) })
	k.env = childEnv(k.deployment, "127.0.0.1:"+strconv.Itoa(testutil.FreePort(t)), k.dbPath, k.secret, append([]string{
		"ORCH_DEFAULT_INSTANCE_ID=" + k.def,
		"ORCH_WARM_POOL_SIZE=0",
		"ORCH_MAP_PROBE_MS=300",
		"MAP_HEARTBEAT_MS=300",
	}, extra...)...)
	k.orch = startOrchestrator(t, k.env)
	waitStatus(t, k.orch.public+"/readyz", http.StatusOK, 60*time.Second)
	edgeLogs := &lockedBuffer{}
	k.edge = openEdgeLog(t, k.orch.control, k.orch.edgeCredential, slog.New(slog.NewJSONHandler(edgeLogs, nil)))
	k.ws = "ws" + strings.TrimPrefix(k.edge.PublicURL(), "http")
	// A failed kit test shows what the edge and the orchestrator said: a player's
	// closed socket or a refused move is explained there, not in the assertion.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("edge log:\n%s\norchestrator log (last 16 kB):\n%s", lastBytes(edgeLogs.String(), 16<<10), lastBytes(k.orch.logs.String(), 16<<10))
		}
	})
	return k
}

// lastBytes is the end of s, at most n bytes of it.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// restart starts the orchestrator again on the same database, control port and
// deployment (after the test stopped or killed it) and waits until it is ready.
func (k *kit) restart(t *testing.T) {
	t.Helper()
	k.orch = startOrchestrator(t, k.env)
	waitStatus(t, k.orch.public+"/readyz", http.StatusOK, 60*time.Second)
	waitStatus(t, k.edge.PublicURL()+"/readyz", http.StatusOK, 30*time.Second)
}

// instance is the orchestrator's view of instance id.
func (k *kit) instance(t *testing.T, id string) orchestrator.Instance {
	t.Helper()
	return getInstance(t, k.orch.control, k.secret, id)
}

// mapCred is the credential instance id's running container holds: with it the test
// speaks on /orch/* as that map would.
func (k *kit) mapCred(t *testing.T, id string) string {
	t.Helper()
	cred, _ := credentialsOf(t, inspect(t, k.cli, k.instance(t, id).ContainerID), k.secret)
	return cred
}

// createMap creates an instance of cfg through the admin API and waits until it is ready.
func (k *kit) createMap(t *testing.T, cfg mapgen.MapConfig) {
	t.Helper()
	postMap(t, k.orch.control, k.secret, cfg)
	waitInstance(t, k.orch.control, k.secret, cfg.InstanceID, orchestrator.StateReady, 60*time.Second)
}

// postMap creates an instance of cfg through the admin API at control, with the
// MAP_FAULT_* variables env for its container (ORCH_ALLOW_FAULT_INJECTION=1), without
// waiting for it.
func postMap(t *testing.T, control, secret string, cfg mapgen.MapConfig, env ...string) {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"instanceId": cfg.InstanceID, "mapId": cfg.MapID, "config": json.RawMessage(raw)}
	if len(env) > 0 {
		body["env"] = env
	}
	testutil.PostJSON(t, control+httpapi.PathAdminMaps, secret, body, http.StatusCreated, nil)
}

// join asks the edge for a join ticket with body (a JoinRequest).
func (k *kit) join(t *testing.T, body string) public.JoinResponse {
	t.Helper()
	var j public.JoinResponse
	testutil.PostJSON(t, k.edge.PublicURL()+public.PathJoin, "", body, http.StatusOK, &j)
	return j
}

// play connects a player through the edge with a join ticket or transfer token to the
// map at ws path, and waits for its first snapshot that shows it.
func (k *kit) play(t *testing.T, path, token string, opt client.Options) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), k.ws+path, client.Hello{Ticket: token}, opt)
	if err != nil {
		t.Fatalf("enter %s: %v", path, err)
	}
	t.Cleanup(func() { c.Close() })
	waitUntil(t, "the first snapshot showing the player", func() bool { _, ok := c.State().SelfEntity(); return ok })
	return c
}

// enterAt is enterAtAs for the saved character of a new authKey.
func (k *kit) enterAt(t *testing.T, cfg mapgen.MapConfig, x, y float64, opt client.Options) *client.Client {
	t.Helper()
	return k.enterAtAs(t, testutil.NewAuthKey(t), cfg, x, y, `{}`, opt)
}

// enterAtAs joins the saved character of authKey through the edge and puts it on the
// map of cfg at (x, y) with attributes attrs, then connects it through the edge: the
// test redeems the join ticket in the default map's place (so no map simulates the
// character meanwhile) and asks for the transfer as that map would, with the state it
// arrives with.
func (k *kit) enterAtAs(t *testing.T, authKey string, cfg mapgen.MapConfig, x, y float64, attrs string, opt client.Options) *client.Client {
	t.Helper()
	j := k.join(t, fmt.Sprintf(`{"authKey":%q}`, authKey))
	a := transferAt(t, k.orch.control, k.mapCred(t, j.InstanceID), j, cfg.MapID, x, y, attrs)
	c := k.play(t, a.WS, a.Token, opt)
	if gx, gy := selfPosition(t, c); math.Abs(gx-x) > 0.5 || math.Abs(gy-y) > 0.5 {
		t.Fatalf("entered %s at (%.2f, %.2f), want (%.2f, %.2f)", cfg.MapID, gx, gy, x, y)
	}
	return c
}

// transferAt redeems join ticket j as the map it names (with that map's credential
// mapCred) and asks the orchestrator, as that map, to transfer the character to map
// mapID at (x, y) carrying attrs. It returns the orchestrator's answer with the token.
func transferAt(t testing.TB, controlURL, mapCred string, j public.JoinResponse, mapID string, x, y float64, attrs string) mapcontract.TransferAnswer {
	t.Helper()
	var r mapcontract.RedeemResult
	testutil.PostJSON(t, controlURL+mapcontract.PathRedeem, mapCred, fmt.Sprintf(`{"instanceId":%q,"token":%q}`, j.InstanceID, j.Ticket), http.StatusOK, &r)
	req := fmt.Sprintf(`{"transferId":"tr-%s","characterId":%q,"fromInstanceId":%q,"toMapId":%q,"epoch":%d,`+
		`"state":{"mapId":%q,"x":%g,"y":%g,"attributes":%s,"revision":%d}}`, randomHex(t, 6), r.CharacterID, j.InstanceID, mapID, r.Epoch,
		mapID, x, y, attrs, time.Now().UnixMicro())
	var a mapcontract.TransferAnswer
	testutil.PostJSON(t, controlURL+mapcontract.PathRequestTransfer, mapCred, req, http.StatusOK, &a)
	return a
}

// flatMap is the default template as map id (and its instance), without water, props
// or NPCs: a player walks it in a straight line wherever it stands.
func flatMap(t testing.TB, id string) mapgen.MapConfig {
	t.Helper()
	c, err := mapgen.Template(mapgen.DefaultMapID)
	if err != nil {
		t.Fatal(err)
	}
	c.MapID, c.InstanceID = id, mapgen.InstanceOfMap(id)
	c.Terrain.WaterLevel, c.StaticCollider.BlockWater, c.Terrain.MaxHeight = 0, false, 0
	c.GenerationRules.PropDensity, c.GenerationRules.NPCDensity = 0, 0
	c.GenerationRules.Portals = nil
	return c
}

// lootMap is a small flat map of size x size metres strewn with items, one every
// spacing metres on average.
func lootMap(t *testing.T, id string, size, spacing int) mapgen.MapConfig {
	t.Helper()
	c := flatMap(t, id)
	c.Bounds = mapgen.Bounds{Width: size, Height: size}
	c.GenerationRules.InteractableDensity = 1_000_000 / (spacing * spacing)
	c.GenerationRules.SpawnPoints = 1
	return c
}

// seededItems waits until the map of cfg (ready, and so generating) has seeded every
// item its generator places at the orchestrator, and returns them as they lie: a map
// registers before it has seeded its items.
func seededItems(t *testing.T, dbPath string, cfg mapgen.MapConfig) []items.Item {
	t.Helper()
	w, err := mapgen.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := game.New(w, cfg, 30)
	if err != nil {
		t.Fatal(err)
	}
	want := len(g.ItemSeed())
	if want == 0 {
		t.Fatalf("map %s places no items", cfg.MapID)
	}
	var ground []items.Item
	waitFor(t, fmt.Sprintf("the %d items of %s seeded", want, cfg.InstanceID), 30*time.Second, func() bool {
		ground = groundItems(t, dbPath, cfg.InstanceID)
		return len(ground) == want
	})
	return ground
}

// groundItems reads the items lying in instance from the orchestrator's database
// (read-only, beside the running orchestrator), sorted by id.
func groundItems(t *testing.T, dbPath, instance string) []items.Item {
	t.Helper()
	db := readDB(t, dbPath)
	rows, err := db.Query(`SELECT item_id, template_id, quantity, location_x, location_y FROM inventory_items
		WHERE location_instance_id = ? AND state = 'active' ORDER BY item_id`, instance)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []items.Item
	for rows.Next() {
		it := items.Item{Place: items.Place{InstanceID: instance}, State: items.StateActive}
		if err := rows.Scan(&it.ID, &it.TemplateID, &it.Quantity, &it.Place.X, &it.Place.Y); err != nil {
			t.Fatal(err)
		}
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// readDB opens the orchestrator's database read-only for the test's own queries.
func readDB(t *testing.T, dbPath string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", sqlite.DSN(dbPath, true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// steer walks the player towards (x, y) at the input rate until it stands within
// near units of it (as the server shows it), an event matches stop (returned), or 30 s
// pass. Events that do not match are passed to other, when it is not nil. It stops
// walking once a transfer is announced, so an arrival is where the map put it. It is
// safe to call from any goroutine.
func steer(c *client.Client, x, y, near float64, stop func(client.Event) bool, other func(client.Event)) (*client.Event, error) {
	tick := time.NewTicker(time.Second / client.W1InputHz)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	walking := true
	for {
		select {
		case e := <-c.Events():
			if stop != nil && stop(e) {
				return &e, nil
			}
			if e.Kind == "transfer" {
				walking = false
			}
			if e.Kind == "closed" {
				return nil, fmt.Errorf("connection closed walking to (%.1f, %.1f): %v", x, y, e.Err)
			}
			if other != nil {
				other(e)
			}
		case <-tick.C:
			e, ok := c.State().SelfEntity()
			if !ok || !walking {
				continue
			}
			px, py := client.Position(e)
			dx, dy := x-px, y-py
			d := math.Hypot(dx, dy)
			if d <= near {
				return nil, nil
			}
			_, _ = c.Move(int(math.Round(dx/d*127)), int(math.Round(dy/d*127)))
		case <-deadline:
			e, ok := c.State().SelfEntity()
			px, py := client.Position(e)
			return nil, fmt.Errorf("walking to (%.1f, %.1f): not there after 30 s (in its snapshots: %t, at (%.1f, %.1f), walking: %t, %d snapshots)",
				x, y, ok, px, py, walking, c.Stats().Snapshots)
		}
	}
}

// enterBesideAs joins the saved character of authKey and moves it onto the map of src,
// one unit west of portal p's trigger circle, carrying attrs (see transferAt), then
// connects it through the edge at base.
func enterBesideAs(t *testing.T, child *childOrchestrator, mapCred, base string, src mapgen.MapConfig, p mapgen.Portal, attrs, authKey string) *client.Client {
	t.Helper()
	var j public.JoinResponse
	testutil.PostJSON(t, child.public+public.PathJoin, "", fmt.Sprintf(`{"authKey":%q}`, authKey), http.StatusOK, &j)
	x, y := float64(p.X-p.Radius)/100-1, float64(p.Y)/100
	a := transferAt(t, child.control, mapCred, j, src.MapID, x, y, attrs)
	c, err := client.Dial(context.Background(), base+a.WS, client.Hello{Ticket: a.Token}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitUntil(t, "the first snapshot on the source map", func() bool { _, ok := c.State().SelfEntity(); return ok })
	if gx, gy := selfPosition(t, c); math.Abs(gx-x) > 0.5 || math.Abs(gy-y) > 0.5 {
		t.Fatalf("entered the source map at (%.2f, %.2f), want its saved (%.2f, %.2f)", gx, gy, x, y)
	}
	return c
}

// selfPosition is the player's own position in the newest snapshot, in units.
func selfPosition(t *testing.T, c *client.Client) (float64, float64) {
	t.Helper()
	e, ok := c.State().SelfEntity()
	if !ok {
		t.Fatal("the snapshot does not show the player")
	}
	return client.Position(e)
}

// waitUntil waits up to 20 s for cond.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitFor(t, what, 20*time.Second, cond)
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// savedState reads a character's checkpointed state from the orchestrator's database
// (read-only, beside the running orchestrator), or nil.
func savedState(t *testing.T, dbPath, characterID string) *record.CharacterState {
	t.Helper()
	db, err := sql.Open("sqlite", sqlite.DSN(dbPath, true))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := record.CharacterState{CharacterID: characterID}
	var attrs string
	err = db.QueryRow(`SELECT map_id, instance_id, x, y, attributes_json FROM character_state WHERE character_id = ?`, characterID).
		Scan(&st.MapID, &st.InstanceID, &st.X, &st.Y, &attrs)
	if err == sql.ErrNoRows {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	st.Attributes = json.RawMessage(attrs)
	return &st
}
