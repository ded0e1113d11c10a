package supervise

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
)

// TestStartInstance_WholeConfig checks that every map is told its whole MapConfig in
// /control/start-instance, whether its container was started for it or handed out from
// the warm pool, and whether its instance has a config of its own or runs its map's
// template: a map in another language has no copy of mapyard's templates.
func TestStartInstance_WholeConfig(t *testing.T) {
	r := newRig(t, func(r *rig) { r.PoolSize = 1 })
	r.ready(t, "d-1")
	r.registeredPoolMember(t)

	t.Run("DefaultMap", func(t *testing.T) {
		want, err := mapgen.Resolve("d-1", mapgen.DefaultMapID, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantSent(t, r.rt.startsOf("d-1"), want)
	})
	t.Run("TemplateMapFromThePool", func(t *testing.T) {
		r.create(t, "b-1")
		inst, err := r.Acquire(context.Background(), "b-1")
		if err != nil {
			t.Fatal(err)
		}
		if !inst.Registered || !r.saw("b-1 starting→ready: handed warm pool container") {
			t.Fatalf("b-1 %+v was not handed a pool container", inst)
		}
		want, err := mapgen.Resolve("b-1", "frontier", nil)
		if err != nil {
			t.Fatal(err)
		}
		wantSent(t, r.rt.startsOf("b-1"), want)
	})
	t.Run("OwnConfig", func(t *testing.T) {
		own, err := mapgen.Complete("c-1", "frontier", []byte(`{"seed":7}`))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(own)
		if _, err := r.Create(context.Background(), orchestrator.CreateInstance{InstanceID: "c-1", MapID: "frontier", Config: raw, Cold: true}); err != nil {
			t.Fatal(err)
		}
		r.ready(t, "c-1")
		wantSent(t, r.rt.startsOf("c-1"), own)
	})
}

// wantSent checks that at least one start-instance was sent and that each carried
// want, complete: it parses strictly, as a map reads it.
func wantSent(t *testing.T, sent []mapcontract.StartInstance, want mapgen.MapConfig) {
	t.Helper()
	if len(sent) == 0 {
		t.Fatal("no start-instance was sent")
	}
	for _, r := range sent {
		got, err := mapgen.Parse(r.Config)
		if err != nil {
			t.Fatalf("start-instance of %s carries config %s, which does not parse as a whole MapConfig: %v", r.InstanceID, r.Config, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("start-instance of %s carries %+v, want %+v", r.InstanceID, got, want)
		}
	}
}

// TestStartInstance_HostTemplates: with a host's templates (ORCH_MAP_TEMPLATE_DIR), a
// map of the host's own is started from its template, and the host's default.json
// replaces the kit's default map.
func TestStartInstance_HostTemplates(t *testing.T) {
	dir := t.TempDir()
	arena, def := mapgen.Default(), mapgen.Default()
	arena.MapID, arena.InstanceID, arena.Seed = "arena", "arena-1", 99
	def.Seed = 4242
	for name, c := range map[string]mapgen.MapConfig{"arena.json": arena, "default.json": def} {
		raw, _ := json.Marshal(c)
		if err := os.WriteFile(filepath.Join(dir, name), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ts, err := mapgen.LoadTemplates(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, func(r *rig) { r.Templates = ts })
	r.ready(t, "d-1")
	if _, err := r.Create(context.Background(), orchestrator.CreateInstance{InstanceID: "a-1", MapID: "arena", Cold: true}); err != nil {
		t.Fatal(err)
	}
	r.ready(t, "a-1")
	for id, want := range map[string]struct {
		mapID string
		seed  uint64
	}{"d-1": {mapgen.DefaultMapID, 4242}, "a-1": {"arena", 99}} {
		c, err := ts.Resolve(id, want.mapID, nil)
		if err != nil || c.Seed != want.seed {
			t.Fatalf("%s resolves to seed %d, %v; want %d", id, c.Seed, err, want.seed)
		}
		wantSent(t, r.rt.startsOf(id), c)
	}
}
