package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/wire"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestImages_PortalsBetweenMapsOfTwoImages runs a kit whose host allows a second map
// image (the kit's own build tagged under another name, as a studio's game would be
// built beside it). A player walks through a portal from a map of the default image to
// a map of the second image and back, as the same character with what it carries;
// docker ps, /admin/maps and the metrics show each map's image. An admin create naming
// an image the host does not allow is 400 image_not_allowed and starts nothing; one
// naming an image the engine lacks leaves its map image_missing, with no restarts, until
// the image exists and an operator restarts it.
func TestImages_PortalsBetweenMapsOfTwoImages(t *testing.T) {
	suffix := randomHex(t, 4)
	alt, later := "mapyard/map-alt:"+suffix, "mapyard/map-alt:"+suffix+"-later"
	k := newKit(t, "ORCH_MAP_IMAGES="+alt+","+later, "ORCH_CHECKPOINT_MS=200", "MAP_SNAPSHOT_PUSH_MS=200")
	dockertest.TagImage(t, k.cli, dockertest.MapImage(), alt)

	// A lobby of the default image and a dungeon of the second, a portal each way.
	lobby, dungeon := smallMap(t, k.deployment+"-lobby"), smallMap(t, k.deployment+"-dungeon")
	lobby.GenerationRules.Portals = []mapgen.PortalRule{{TargetMapID: dungeon.MapID, Count: 1}}
	dungeon.GenerationRules.Portals = []mapgen.PortalRule{{TargetMapID: lobby.MapID, Count: 1}}
	k.createMap(t, lobby)
	k.createMapOfImage(t, dungeon, alt)

	// A map of an image the engine does not have yet: it waits in image_missing while
	// the rest of the test plays (many probe rounds at ORCH_MAP_PROBE_MS=300).
	missing := k.deployment + "-later"
	testutil.PostJSON(t, k.orch.control+httpapi.PathAdminMaps, k.secret,
		fmt.Sprintf(`{"instanceId":%q,"mapId":"frontier","image":%q}`, missing, later), http.StatusCreated, nil)
	inst := waitInstance(t, k.orch.control, k.secret, missing, orchestrator.StateImageMissing, 30*time.Second)
	if inst.Image != later || inst.Restarts != 0 || !strings.Contains(inst.Reason, "missing on the engine") {
		t.Fatalf("%s %+v, want image_missing naming %s, no restarts", missing, inst, later)
	}
	stateLog := func() int { return strings.Count(k.orch.logs.String(), `"instance":"`+missing+`","from"`) }
	waitUntil(t, "the map-state log line", func() bool {
		return strings.Contains(k.orch.logs.String(), `"instance":"`+missing+`","from":"starting","to":"image_missing"`)
	})
	logged := stateLog()

	t.Run("EachMapShowsItsImage", func(t *testing.T) {
		for _, m := range []struct{ id, image string }{
			{k.def, dockertest.MapImage()}, {lobby.InstanceID, dockertest.MapImage()}, {dungeon.InstanceID, alt},
		} {
			inst := k.instance(t, m.id)
			info := inspect(t, k.cli, inst.ContainerID)
			if inst.Image != m.image || info.Config.Image != m.image || info.Config.Labels[docker.LabelImage] != m.image {
				t.Fatalf("%s: /admin/maps says %q, the container runs %q labelled %q; want %s",
					m.id, inst.Image, info.Config.Image, info.Config.Labels[docker.LabelImage], m.image)
			}
		}
		if got := k.byImageLabel(t, alt); len(got) != 1 || got[0] != k.instance(t, dungeon.InstanceID).ContainerID {
			t.Fatalf("docker ps --filter label=%s=%s: %v, want the dungeon's container", docker.LabelImage, alt, got)
		}
		waitMetric(t, k.orch.control, k.secret, fmt.Sprintf(`mapyard_map_instances_by_image{image=%q,state="ready"} 1`, alt), 10*time.Second)
		waitMetric(t, k.orch.control, k.secret, fmt.Sprintf(`mapyard_map_instances_by_image{image=%q,state="ready"} 2`, dockertest.MapImage()), 10*time.Second)
		waitMetric(t, k.orch.control, k.secret, fmt.Sprintf(`mapyard_map_instances_by_image{image=%q,state="image_missing"} 1`, later), 10*time.Second)
	})

	t.Run("PortalCarriesTheCharacterThereAndBack", func(t *testing.T) {
		lw, dw := generate(t, lobby), generate(t, dungeon)
		there, back := lw.Portals[0], dw.Portals[0]
		x, y := float64(there.X-there.Radius)/100-1, float64(there.Y)/100
		const carried = `{"gold":12,"studio":{"quest":"intro"}}`
		c := k.enterAtAs(t, testutil.NewAuthKey(t), lobby, x, y, carried, client.Options{})
		character := c.Welcome().CharacterID

		w := walkThrough(t, c, there, dungeon.MapID)
		if w.InstanceID != dungeon.InstanceID || w.CharacterID != character {
			t.Fatalf("arrived in the dungeon as %+v, want %s on %s", w, character, dungeon.InstanceID)
		}
		// The map of the second image owns the character now and pushes it with
		// everything it carried.
		waitUntil(t, "the dungeon's push of the character", func() bool {
			st := savedState(t, k.dbPath, character)
			return st != nil && st.InstanceID == dungeon.InstanceID
		})
		if st := savedState(t, k.dbPath, character); !sameJSON(t, st.Attributes, carried) {
			t.Fatalf("saved by the dungeon: %s, want the attributes it arrived with", st.Attributes)
		}

		w = walkThrough(t, c, back, lobby.MapID)
		if w.InstanceID != lobby.InstanceID || w.CharacterID != character {
			t.Fatalf("back in the lobby as %+v, want %s on %s", w, character, lobby.InstanceID)
		}
		waitUntil(t, "the lobby's push of the character", func() bool {
			st := savedState(t, k.dbPath, character)
			return st != nil && st.InstanceID == lobby.InstanceID
		})
		if st := savedState(t, k.dbPath, character); !sameJSON(t, st.Attributes, carried) {
			t.Fatalf("saved by the lobby: %s, want the attributes it carried through both portals", st.Attributes)
		}
	})

	t.Run("ImageMissingUntilRestartedOnceItExists", func(t *testing.T) {
		// Everything above took seconds of probe rounds: no retry, no restart.
		if inst := k.instance(t, missing); inst.State != orchestrator.StateImageMissing || inst.Restarts != 0 {
			t.Fatalf("%s left image_missing on its own: %+v", missing, inst)
		}
		if n := stateLog(); n != logged {
			t.Fatalf("%s changed state %d more times while its image was missing", missing, n-logged)
		}
		if got := k.byName(t, docker.ContainerName(k.deployment, missing)); len(got) != 0 {
			t.Fatalf("containers %v left behind by a missing image", got)
		}

		dockertest.TagImage(t, k.cli, dockertest.MapImage(), later)
		testutil.PostJSON(t, k.orch.control+httpapi.PathAdminMaps+"/"+missing+"/restart", k.secret, `{}`, http.StatusAccepted, nil)
		inst := waitInstance(t, k.orch.control, k.secret, missing, orchestrator.StateReady, 60*time.Second)
		if img := inspect(t, k.cli, inst.ContainerID).Config.Image; img != later || inst.Restarts != 0 {
			t.Fatalf("%s after its image exists: %+v running %q", missing, inst, img)
		}
	})

	t.Run("ErrImageNotAllowed", func(t *testing.T) {
		id := k.deployment + "-evil"
		var e struct{ Error apierr.Error }
		testutil.PostJSON(t, k.orch.control+httpapi.PathAdminMaps, k.secret,
			fmt.Sprintf(`{"instanceId":%q,"mapId":"frontier","image":"evil/miner:1"}`, id), http.StatusBadRequest, &e)
		if e.Error.Code != apierr.EIMAGENOTALLOWED || !strings.Contains(e.Error.Message, alt) {
			t.Fatalf("answer %+v, want image_not_allowed naming what the host allows", e.Error)
		}
		testutil.GetJSON(t, k.orch.control+httpapi.PathAdminMaps+"/"+id, k.secret, http.StatusNotFound, nil)
		if got := k.byName(t, docker.ContainerName(k.deployment, id)); len(got) != 0 {
			t.Fatalf("containers %v were created for a refused image", got)
		}
	})
}

// smallMap is a flat 400 m map with one spawn point and no portals: cheap to generate.
func smallMap(t testing.TB, id string) mapgen.MapConfig {
	t.Helper()
	c := flatMap(t, id)
	c.Bounds = mapgen.Bounds{Width: 400, Height: 400}
	c.GenerationRules.SpawnPoints, c.GenerationRules.InteractableDensity = 1, 0
	return c
}

func generate(t testing.TB, c mapgen.MapConfig) *mapgen.World {
	t.Helper()
	w, err := mapgen.Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// createMapOfImage creates an instance of cfg running image through the admin API and
// waits until it is ready.
func (k *kit) createMapOfImage(t *testing.T, cfg mapgen.MapConfig, image string) {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testutil.PostJSON(t, k.orch.control+httpapi.PathAdminMaps, k.secret,
		fmt.Sprintf(`{"instanceId":%q,"mapId":%q,"image":%q,"config":%s}`, cfg.InstanceID, cfg.MapID, image, raw), http.StatusCreated, nil)
	waitInstance(t, k.orch.control, k.secret, cfg.InstanceID, orchestrator.StateReady, 60*time.Second)
}

// walkThrough walks the player into portal p and returns the welcome of the map it
// leads to (mapID).
func walkThrough(t *testing.T, c *client.Client, p mapgen.Portal, mapID string) wire.Welcome {
	t.Helper()
	ev, err := steer(c, float64(p.X)/100, float64(p.Y)/100, 0, func(e client.Event) bool {
		if e.Kind == "event" && e.Event.Name == "transfer_denied" {
			t.Fatalf("transfer to %s denied: %+v", mapID, e.Event)
		}
		return e.Kind == "welcome" && e.Welcome.MapID == mapID
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a snapshot of "+mapID, func() bool { _, ok := c.State().SelfEntity(); return ok })
	return *ev.Welcome
}

// sameJSON reports whether two JSON documents hold the same value.
func sameJSON(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		return false
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// byImageLabel lists the kit's containers labelled with image, as
// `docker ps --filter label=io.mapyard.image=<image>` does.
func (k *kit) byImageLabel(t *testing.T, image string) []string {
	t.Helper()
	return k.list(t, filters.Arg("label", docker.LabelImage+"="+image))
}

// byName lists the kit's containers named name.
func (k *kit) byName(t *testing.T, name string) []string {
	t.Helper()
	return k.list(t, filters.Arg("name", "^/"+name+"$"))
}

func (k *kit) list(t *testing.T, f ...filters.KeyValuePair) []string {
	t.Helper()
	args := filters.NewArgs(append(f, filters.Arg("label", docker.LabelDeployment+"="+k.deployment))...)
	list, err := k.cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: args})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	return ids
}
