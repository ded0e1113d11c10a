package mapgen_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
)

func TestTemplates(t *testing.T) {
	if got, want := mapgen.TemplateIDs(), []string{"default", "frontier", "tag"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("TemplateIDs() = %q, want %q", got, want)
	}
	t.Run("DefaultIsDefaultMap", func(t *testing.T) {
		c := mapgen.Default()
		if got, want := c.MapID, mapgen.DefaultMapID; got != want {
			t.Errorf("MapID = %q, want %q", got, want)
		}
		if got, want := c.InstanceID, mapgen.DefaultInstanceID; got != want {
			t.Errorf("InstanceID = %q, want %q", got, want)
		}
		if got, want := c.Bounds, (mapgen.Bounds{Width: 2000, Height: 2000}); got != want {
			t.Errorf("Bounds = %+v, want %+v", got, want)
		}
	})
	t.Run("PortalsLinkTheTemplates", func(t *testing.T) {
		for _, link := range [][2]string{{"default", "frontier"}, {"frontier", "default"}, {"default", "tag"}, {"tag", "default"}} {
			w := mustGenerate(t, mustTemplate(t, link[0]))
			found := false
			for _, p := range w.Portals {
				found = found || p.TargetMapID == link[1]
			}
			if !found {
				t.Errorf("map %q has no portal to %q: %+v", link[0], link[1], w.Portals)
			}
		}
	})
	t.Run("TagRunsItsOwnImage", func(t *testing.T) {
		if got, want := mustTemplate(t, "tag").Image, "mapyard/tag:latest"; got != want {
			t.Errorf("tag's image = %q, want %q", got, want)
		}
	})
	t.Run("CopiesAreIndependent", func(t *testing.T) {
		a := mapgen.Default()
		a.PropSetIDs[0] = "changed"
		if got := mapgen.Default().PropSetIDs[0]; got == "changed" {
			t.Fatal("changing one template copy changed the next")
		}
	})
	t.Run("ErrUnknownMap", func(t *testing.T) {
		if _, err := mapgen.Template("atlantis"); !errors.Is(err, mapgen.ErrUnknownMap) {
			t.Fatalf("Template(atlantis) = %v, want ErrUnknownMap", err)
		}
	})
	t.Run("ErrInvalidID", func(t *testing.T) {
		var ve *mapgen.ValidationError
		if _, err := mapgen.Template("../maps/default"); !errors.As(err, &ve) {
			t.Fatalf("Template(path) = %v, want a *ValidationError", err)
		}
	})
}

func TestDerive(t *testing.T) {
	frontier := mustTemplate(t, "frontier")
	w := mustGenerate(t, frontier)
	var discover *mapgen.Portal
	for i := range w.Portals {
		if w.Portals[i].TargetSeed != 0 {
			discover = &w.Portals[i]
		}
	}
	if discover == nil {
		t.Fatal("frontier has no portal to a discovered map")
	}

	child, err := mapgen.Derive(frontier, discover.TargetSeed)
	if err != nil {
		t.Fatalf("Derive: %v", err)
	}
	t.Run("IDMatchesPortal", func(t *testing.T) {
		if got, want := child.MapID, discover.TargetMapID; got != want {
			t.Fatalf("derived MapID = %q, portal says %q", got, want)
		}
		if got, want := child.InstanceID, child.MapID+"-1"; got != want {
			t.Fatalf("InstanceID = %q, want %q", got, want)
		}
	})
	t.Run("Deterministic", func(t *testing.T) {
		again, err := mapgen.Derive(frontier, discover.TargetSeed)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again, child) {
			t.Fatalf("Derive differs between calls:\n%+v\n%+v", again, child)
		}
	})
	t.Run("PortalBackToParent", func(t *testing.T) {
		cw := mustGenerate(t, child)
		if got, want := cw.Portals[0].TargetMapID, "frontier"; got != want {
			t.Fatalf("first portal leads to %q, want %q", got, want)
		}
	})
	t.Run("DifferentSeedDifferentMap", func(t *testing.T) {
		other, err := mapgen.Derive(frontier, discover.TargetSeed+1)
		if err != nil {
			t.Fatal(err)
		}
		if other.MapID == child.MapID {
			t.Fatalf("two seeds gave the same map id %q", other.MapID)
		}
	})
	t.Run("ErrSeedTooLarge", func(t *testing.T) {
		if _, err := mapgen.Derive(frontier, mapgen.MaxSeed+1); err == nil {
			t.Fatal("Derive accepted a seed beyond MaxSeed")
		}
	})
	t.Run("ErrInvalidParent", func(t *testing.T) {
		bad := frontier.Clone()
		bad.Bounds.Width = 0
		if _, err := mapgen.Derive(bad, 1); err == nil {
			t.Fatal("Derive accepted an invalid parent")
		}
	})
}

func TestResolve(t *testing.T) {
	t.Run("Template", func(t *testing.T) {
		for _, raw := range []string{"", "null", " null "} {
			c, err := mapgen.Resolve("frontier-7", "frontier", []byte(raw))
			if err != nil || c.InstanceID != "frontier-7" || c.MapID != "frontier" {
				t.Fatalf("%q: config %+v err %v", raw, c.MapID, err)
			}
		}
	})
	t.Run("Given", func(t *testing.T) {
		c := mapgen.Default()
		c.InstanceID, c.Seed = "default-2", 99
		raw, _ := json.Marshal(c)
		got, err := mapgen.Resolve("default-2", "default", raw)
		if err != nil || got.Seed != 99 {
			t.Fatalf("seed %d err %v", got.Seed, err)
		}
		if _, err := mapgen.Resolve("default-3", "default", raw); err == nil {
			t.Fatal("a config for another instance was accepted")
		}
	})
	t.Run("ErrUnknownMap", func(t *testing.T) {
		if _, err := mapgen.Resolve("forest-1", "forest", nil); !errors.Is(err, mapgen.ErrUnknownMap) {
			t.Fatalf("err %v, want ErrUnknownMap", err)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		if _, err := mapgen.Resolve("forest-1", "forest", []byte(`{"mapId":"forest","instanceId":"forest-1","seed":7}`)); err == nil {
			t.Fatal("a config without schemaVersion was accepted")
		}
	})
}

func TestComplete(t *testing.T) {
	t.Run("SeedOverTemplate", func(t *testing.T) {
		c, err := mapgen.Complete("frontier-2", "frontier", []byte(`{"seed":7,"terrain":{"waterLevel":100}}`))
		if err != nil {
			t.Fatal(err)
		}
		tmpl, _ := mapgen.Template("frontier")
		if c.Seed != 7 || c.Terrain.WaterLevel != 100 || c.InstanceID != "frontier-2" || c.MapID != "frontier" {
			t.Fatalf("got seed %d water %d instance %q map %q", c.Seed, c.Terrain.WaterLevel, c.InstanceID, c.MapID)
		}
		if c.Terrain.MaxHeight != tmpl.Terrain.MaxHeight || c.Bounds != tmpl.Bounds {
			t.Fatalf("fields not in the patch were not kept from the template: %+v", c.Terrain)
		}
	})
	t.Run("MapWithoutTemplate", func(t *testing.T) {
		c, err := mapgen.Complete("forest-1", "forest", []byte(`{"seed":7}`))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Bounds, mapgen.Default().Bounds; c.Seed != 7 || c.MapID != "forest" || got != want {
			t.Fatalf("seed %d map %q bounds %+v, want the default map's %+v", c.Seed, c.MapID, got, want)
		}
		// The completed config is one the map server accepts as it is.
		raw, _ := json.Marshal(c)
		if _, err := mapgen.Resolve("forest-1", "forest", raw); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("Full", func(t *testing.T) {
		c := mapgen.Default()
		c.InstanceID, c.Seed = "default-2", 99
		raw, _ := json.Marshal(c)
		got, err := mapgen.Complete("default-2", "default", raw)
		if err != nil || got.Seed != 99 {
			t.Fatalf("seed %d err %v", got.Seed, err)
		}
	})
	t.Run("ErrOtherInstance", func(t *testing.T) {
		if _, err := mapgen.Complete("forest-1", "forest", []byte(`{"instanceId":"forest-2"}`)); err == nil {
			t.Fatal("a config naming another instance was accepted")
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, raw := range []string{`{"seed":-1}`, `{"bounds":{"width":0}}`, `[1]`, `{"nope":1}`} {
			if _, err := mapgen.Complete("forest-1", "forest", []byte(raw)); err == nil {
				t.Fatalf("%s was accepted", raw)
			}
		}
	})
}

func TestStartConfig(t *testing.T) {
	t.Run("TemplateWhenAbsent", func(t *testing.T) {
		for _, raw := range []string{"", "null"} {
			got, err := mapgen.StartConfig("default-1", "default", []byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			// What the map receives parses strictly as it is: the whole config.
			c, err := mapgen.Parse(got)
			if err != nil {
				t.Fatalf("%q: the config sent does not parse: %v", raw, err)
			}
			if want := mapgen.Default(); !reflect.DeepEqual(c, want) {
				t.Fatalf("%q: sent %+v, want the default template %+v", raw, c, want)
			}
		}
	})
	t.Run("InstanceOfTemplate", func(t *testing.T) {
		got, err := mapgen.StartConfig("frontier-2", "frontier", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mapgen.Resolve("frontier-2", "frontier", got); err != nil {
			t.Fatalf("the map would refuse what it is sent: %v", err)
		}
	})
	t.Run("GivenKept", func(t *testing.T) {
		raw := []byte(`{"schemaVersion":1,"mapId":"x"}`)
		got, err := mapgen.StartConfig("x-1", "x", raw)
		if err != nil || string(got) != string(raw) {
			t.Fatalf("got %s err %v, want the instance's own config as it is", got, err)
		}
	})
	t.Run("ErrUnknownMap", func(t *testing.T) {
		if _, err := mapgen.StartConfig("forest-1", "forest", nil); !errors.Is(err, mapgen.ErrUnknownMap) {
			t.Fatalf("err %v, want ErrUnknownMap", err)
		}
	})
}

// TestLoadTemplates: a host's directory adds a map and replaces the kit's default one;
// what it does not name stays the kit's; a nil set is the kit's alone; a file that is
// no valid config, or names another map, is refused with its path and why.
func TestLoadTemplates(t *testing.T) {
	write := func(t *testing.T, dir, name string, c mapgen.MapConfig) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), configJSON(t, c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	arena := mapgen.Default()
	arena.MapID, arena.InstanceID, arena.Seed, arena.Image = "arena", "arena-1", 99, "studio/arena:1"
	def := mapgen.Default()
	def.Seed = 4242
	dir := t.TempDir()
	write(t, dir, "arena.json", arena)
	write(t, dir, "default.json", def)
	if err := os.WriteFile(filepath.Join(dir, "README.txt"), []byte("notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A template may leave its instance id out: instances are named when created.
	var moor map[string]any
	_ = json.Unmarshal(configJSON(t, arena), &moor)
	moor["mapId"], moor["image"] = "moor", ""
	delete(moor, "instanceId")
	raw, _ := json.Marshal(moor)
	if err := os.WriteFile(filepath.Join(dir, "moor.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	ts, err := mapgen.LoadTemplates(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := ts.Host(); !slices.Equal(got, []string{"arena", "default", "moor"}) {
		t.Fatalf("host templates %v", got)
	}
	c, err := ts.Resolve("arena-2", "arena", nil)
	if err != nil || c.Seed != 99 || c.Image != "studio/arena:1" || c.InstanceID != "arena-2" {
		t.Fatalf("arena resolved to %+v, %v", c, err)
	}
	if c, err := ts.Template("default"); err != nil || c.Seed != 4242 {
		t.Fatalf("the host's default: seed %d, %v", c.Seed, err)
	}
	if c, err := ts.Template("moor"); err != nil || c.InstanceID != "moor-1" || c.Seed != 99 {
		t.Fatalf("a template without its instance id: %+v, %v", c, err)
	}
	if c, err := ts.Complete("heath-1", "heath", []byte(`{"seed":7}`)); err != nil || c.Seed != 7 || c.Bounds != def.Bounds {
		t.Fatalf("a map without a template is laid over the host's default: %+v, %v", c, err)
	}
	raw, err = ts.StartConfig("arena-1", "arena", nil)
	if err != nil || !strings.Contains(string(raw), `"mapId":"arena"`) {
		t.Fatalf("start config %s, %v", raw, err)
	}
	if _, err := (*mapgen.Templates)(nil).Template("arena"); !errors.Is(err, mapgen.ErrUnknownMap) {
		t.Fatalf("the kit alone knows arena: %v", err)
	}
	if c, err := (*mapgen.Templates)(nil).Template("default"); err != nil || c.Seed == 4242 {
		t.Fatalf("the kit's default changed: %v", err)
	}

	for _, bad := range []struct{ name, file, body, want string }{
		{"Invalid", "moor.json", `{"schemaVersion":1,"mapId":"moor","bounds":{"width":-5}}`, "moor.json"},
		{"OtherMap", "moor.json", string(configJSON(t, arena)), `declares mapId "arena"`},
		{"BadName", "Moor.json", string(configJSON(t, arena)), "the file's name is the map id"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, bad.file), []byte(bad.body), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := mapgen.LoadTemplates(dir); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Fatalf("LoadTemplates = %v, want an error with %q", err, bad.want)
			}
		})
	}
	if _, err := mapgen.LoadTemplates(filepath.Join(dir, "absent")); err == nil {
		t.Fatal("a directory that does not exist was taken")
	}
}

// configJSON is c as a template file holds it.
func configJSON(t *testing.T, c mapgen.MapConfig) []byte {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
