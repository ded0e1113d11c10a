package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/tag"
	"github.com/mapyard/mapyard/mapserver/wire"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestTag_SecondGameInItsOwnImage runs tag, the game written against the game API
// alone, in its own image (mapyard/tag, built by `make images`) beside the kit's map
// on a real engine: players play it through the edge with the Go client, and a
// character walks from a map of the reference game into the arena and back through the
// templates' portals, carrying what it carries, its items staying with the
// orchestrator while it plays tag.
func TestTag_SecondGameInItsOwnImage(t *testing.T) {
	image := dockertest.TagGameImage()
	k := newKit(t, "ORCH_MAP_IMAGES="+image, "ORCH_CHECKPOINT_MS=200", "MAP_SNAPSHOT_PUSH_MS=200")
	dockertest.RequireImage(t, k.cli, image)
	// The arena of the tag template, in this checkout's build of its image (a host's
	// template names mapyard/tag:latest, which `make images` tags too).
	arena, err := mapgen.Template("tag")
	if err != nil {
		t.Fatal(err)
	}
	testutil.PostJSON(t, k.orch.control+httpapi.PathAdminMaps, k.secret,
		fmt.Sprintf(`{"instanceId":%q,"mapId":"tag","image":%q}`, arena.InstanceID, image), http.StatusCreated, nil)
	if inst := waitInstance(t, k.orch.control, k.secret, arena.InstanceID, orchestrator.StateReady, 60*time.Second); inst.Image != image {
		t.Fatalf("the arena runs %q, want %s", inst.Image, image)
	}
	aw := generate(t, arena)

	t.Run("PlayedThroughTheEdge", func(t *testing.T) {
		sp := aw.Spawns[0]
		x, y := float64(sp.X)/100, float64(sp.Y)/100
		a := k.enterAt(t, arena, x, y, client.Options{})
		b := k.enterAt(t, arena, x+2, y, client.Options{})
		ai, bi := listen(a), listen(b)
		if w := b.Welcome(); w.MapID != "tag" || w.InstanceID != arena.InstanceID {
			t.Fatalf("welcome %+v, want the arena", w)
		}
		ae, be := self(t, a).ID, self(t, b).ID

		// What a client of any game sees: four bases as zones of their radius, the
		// first to arrive marked as it, both shielded on arrival.
		waitUntil(t, "the arena in b's snapshots", func() bool {
			zones, marked := 0, uint64(0)
			for _, e := range b.State().Entities {
				if e.Kind == wire.EntityZone && e.Template == 300 {
					zones++
				}
				if e.Kind == wire.EntityPlayer && e.State&wire.PlayerMarked != 0 {
					marked = e.ID
				}
			}
			return zones == 4 && marked == ae
		})

		tagCmd := func(in *inbox, id uint64) string {
			t.Helper()
			acks, seen := in.c.Stats().Acks, in.len()
			if _, err := in.c.Command(tag.Feature, tag.ActionTag, map[string]uint64{"id": id}); err != nil {
				t.Fatal(err)
			}
			return in.answer(t, acks, seen)
		}
		if code := tagCmd(bi, ae); code != tag.CodeNotIt {
			t.Fatalf("b's tag answered %q, want %s", code, tag.CodeNotIt)
		}
		if code := tagCmd(ai, be); code != tag.CodeShielded {
			t.Fatalf("a tagging b just arrived answered %q, want %s", code, tag.CodeShielded)
		}
		// The shield lasts ImmuneTicks of the map's clock; then the tag is acknowledged.
		time.Sleep(time.Duration(tag.ImmuneTicks) * time.Second / 30)
		waitUntil(t, "a's tag of b acknowledged", func() bool {
			code := tagCmd(ai, be)
			if code != "" && code != tag.CodeShielded {
				t.Fatalf("a tagging b within reach answered %q, want an ack", code)
			}
			return code == ""
		})
		for _, in := range []*inbox{ai, bi} {
			in.wait(t, "the event that a tagged b", func(e *wire.Event) bool {
				d, _ := e.Data.(map[string]any)
				return e.Name == tag.EventTagged && d["it"] == float64(be) && d["by"] == float64(ae)
			})
		}
		waitUntil(t, "b marked as it in its own snapshot", func() bool {
			e, ok := b.State().SelfEntity()
			return ok && e.State&wire.PlayerMarked != 0
		})

		if _, err := a.Command(tag.Feature, tag.ActionScores, struct{}{}); err != nil {
			t.Fatal(err)
		}
		d, _ := ai.wait(t, "the scores", func(e *wire.Event) bool { return e.Name == tag.ActionScores }).Data.(map[string]any)
		scores, _ := d["scores"].([]any)
		if len(scores) != 2 || scores[0].(map[string]any)["id"] != float64(ae) || scores[0].(map[string]any)["tags"] != float64(1) {
			t.Fatalf("scores %v, want a first with one tag", scores)
		}
		// The kit's own players/names works on any game's map.
		if _, err := a.Command("players", "names", map[string][]uint64{"ids": {be}}); err != nil {
			t.Fatal(err)
		}
		d, _ = ai.wait(t, "the names", func(e *wire.Event) bool { return e.Name == "names" }).Data.(map[string]any)
		names, _ := d["names"].([]any)
		if len(names) != 1 || names[0].(map[string]any)["characterId"] != b.Welcome().CharacterID {
			t.Fatalf("names %v, want b's", names)
		}
	})

	// A config the game refuses (tag's arenas are small) is answered 400 with the
	// game's own reason, and nothing is kept: no instance, no container.
	t.Run("ErrMapConfigRefused", func(t *testing.T) {
		id := k.deployment + "-huge"
		var e struct{ Error apierr.Error }
		testutil.PostJSON(t, k.orch.control+httpapi.PathAdminMaps, k.secret,
			fmt.Sprintf(`{"instanceId":%q,"mapId":"tag","image":%q,"config":{"bounds":{"width":2000,"height":2000}}}`, id, image),
			http.StatusBadRequest, &e)
		if e.Error.Code != apierr.EMAPCONFIGREFUSED || !strings.Contains(e.Error.Message, "at most 400 m") {
			t.Fatalf("answer %+v, want map_config_refused with the game's reason", e.Error)
		}
		testutil.GetJSON(t, k.orch.control+httpapi.PathAdminMaps+"/"+id, k.secret, http.StatusNotFound, nil)
		if got := k.byName(t, docker.ContainerName(k.deployment, id)); len(got) != 0 {
			t.Fatalf("containers %v left by a refused config", got)
		}
	})

	t.Run("PortalsCarryTheCharacterAndItsItems", func(t *testing.T) {
		// A lobby of the reference game, strewn with items, with a portal to the arena.
		lobby := lootMap(t, k.deployment+"-lobby", 200, 20)
		lobby.GenerationRules.Portals = []mapgen.PortalRule{{TargetMapID: "tag", Count: 1}}
		k.createMap(t, lobby)
		lw := generate(t, lobby)
		toArena := lw.Portals[0]
		it := nearestItem(t, seededItems(t, k.dbPath, lobby), toArena)

		const carried = `{"skills":{"melee":2},"studio":{"quest":"intro"}}`
		c := k.enterAtAs(t, testutil.NewAuthKey(t), lobby, float64(it.Place.X)/100, float64(it.Place.Y)/100, carried, client.Options{})
		character := c.Welcome().CharacterID
		pickUp(t, c, it.ID)
		db := readDB(t, k.dbPath)

		w := walkThrough(t, c, toArena, "tag")
		if w.InstanceID != arena.InstanceID || w.CharacterID != character {
			t.Fatalf("arrived in the arena as %+v", w)
		}
		waitUntil(t, "the arena's push of the character", func() bool {
			st := savedState(t, k.dbPath, character)
			return st != nil && st.InstanceID == arena.InstanceID
		})
		if st := savedState(t, k.dbPath, character); !carries(t, st.Attributes, carried) {
			t.Fatalf("saved by the arena: %s, want what the character carried in", st.Attributes)
		}
		if got := heldBy(t, db, it.ID); !slices.Equal(got, []string{character}) {
			t.Fatalf("while the character plays tag, %s is held by %v: the orchestrator keeps it for %s", it.ID, got, character)
		}

		// The arena's portal leads to the default map, of the reference game: the item is
		// there again. And the default map's portal to the arena, and back.
		// From the spawn point it arrived at, most of the way in a straight line, then
		// into the portal (tag's tests: every spawn point sees the portal).
		back := aw.Portals[0]
		px, py := selfPosition(t, c)
		mx, my := px+0.6*(float64(back.X)/100-px), py+0.6*(float64(back.Y)/100-py)
		if _, err := steer(c, mx, my, 2, nil, nil); err != nil {
			t.Fatal(err)
		}
		dw := generate(t, mapgen.Default())
		var toTag mapgen.Portal
		for _, p := range dw.Portals {
			if p.TargetMapID == "tag" {
				toTag = p
			}
		}
		for round := range 2 {
			w = walkThrough(t, c, back, mapgen.DefaultMapID)
			if w.InstanceID != k.def {
				t.Fatalf("round %d: arrived on %s, want the default map %s", round, w.InstanceID, k.def)
			}
			if inv := inventoryItems(t, c); !slices.Contains(inv, it.ID) {
				t.Fatalf("round %d: back on the reference game holding %v, want %s", round, inv, it.ID)
			}
			waitUntil(t, "the default map's push of the character", func() bool {
				st := savedState(t, k.dbPath, character)
				return st != nil && st.InstanceID == k.def
			})
			if st := savedState(t, k.dbPath, character); !carries(t, st.Attributes, carried) {
				t.Fatalf("round %d: saved by the default map: %s, want what it carried through tag", round, st.Attributes)
			}
			if round == 1 {
				break
			}
			if w = walkThrough(t, c, toTag, "tag"); w.InstanceID != arena.InstanceID {
				t.Fatalf("the default map's portal to tag led to %s", w.InstanceID)
			}
		}
	})
}

// self is the player's own entity in its newest snapshot.
func self(t *testing.T, c *client.Client) wire.Entity {
	t.Helper()
	e, ok := c.State().SelfEntity()
	if !ok {
		t.Fatal("no own entity in the snapshot")
	}
	return e
}

// inbox keeps every event a player gets, so that a test looks for one among them
// whatever came before or after it.
type inbox struct {
	c   *client.Client
	mu  sync.Mutex
	evs []client.Event
}

// listen starts keeping c's events; nothing else may read them.
func listen(c *client.Client) *inbox {
	in := &inbox{c: c}
	go func() {
		for {
			select {
			case e := <-c.Events():
				in.mu.Lock()
				in.evs = append(in.evs, e)
				in.mu.Unlock()
			case <-c.Done():
				return
			}
		}
	}()
	return in
}

func (in *inbox) len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.evs)
}

// answer waits for the answer to the player's last command, sent when the client had
// counted acks acks and the inbox held seen events: "" for an ack, else the refusal's
// code.
func (in *inbox) answer(t *testing.T, acks int64, seen int) string {
	t.Helper()
	code := ""
	waitUntil(t, "the answer to the command", func() bool {
		in.mu.Lock()
		defer in.mu.Unlock()
		for _, e := range in.evs[seen:] {
			if e.Kind == "error" {
				code = e.Error.Code
				return true
			}
		}
		return in.c.Stats().Acks > acks
	})
	return code
}

// wait waits until the player got an event that match says is the one (what), and
// returns it.
func (in *inbox) wait(t *testing.T, what string, match func(*wire.Event) bool) *wire.Event {
	t.Helper()
	var found *wire.Event
	waitUntil(t, what, func() bool {
		in.mu.Lock()
		defer in.mu.Unlock()
		for _, e := range in.evs {
			if e.Kind == "event" && match(e.Event) {
				found = e.Event
				return true
			}
		}
		return false
	})
	return found
}

// carries reports whether attrs holds every attribute of carried, unchanged (a game
// may add its own beside them, as tag adds a score).
func carries(t *testing.T, attrs json.RawMessage, carried string) bool {
	t.Helper()
	var got, want map[string]json.RawMessage
	if json.Unmarshal(attrs, &got) != nil {
		return false
	}
	if err := json.Unmarshal([]byte(carried), &want); err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if !sameJSON(t, got[k], string(v)) {
			return false
		}
	}
	return true
}

// eventData waits for the next event named name and returns its data: for a player
// whose events no inbox keeps.
func eventData(t *testing.T, c *client.Client, name string) map[string]any {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-c.Events():
			if e.Kind == "event" && e.Event.Name == name {
				d, _ := e.Event.Data.(map[string]any)
				return d
			}
		case <-deadline:
			t.Fatalf("no %q event within 10 s", name)
			return nil
		}
	}
}

// inventoryItems waits for the player's next "inventory" event and returns the ids of
// what it carries.
func inventoryItems(t *testing.T, c *client.Client) []string {
	t.Helper()
	raw, _ := json.Marshal(eventData(t, c, "inventory"))
	var inv struct {
		Entries []items.Entry `json:"entries"`
	}
	if err := json.Unmarshal(raw, &inv); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range inv.Entries {
		ids = append(ids, e.ItemID)
	}
	return ids
}

// nearestItem is the item lying nearest to portal p, outside its trigger area.
func nearestItem(t *testing.T, ground []items.Item, p mapgen.Portal) items.Item {
	t.Helper()
	best, bestD := items.Item{}, math.Inf(1)
	for _, it := range ground {
		d := math.Hypot(float64(it.Place.X-p.X), float64(it.Place.Y-p.Y))
		if d > float64(p.Radius)+300 && d < bestD {
			best, bestD = it, d
		}
	}
	if best.ID == "" {
		t.Fatal("no item lies near the portal")
	}
	return best
}
