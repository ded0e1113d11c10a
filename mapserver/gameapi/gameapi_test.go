package gameapi_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/tag"
	"github.com/mapyard/mapyard/mapserver/wire"
)

func TestRecorder(t *testing.T) {
	var r gameapi.Recorder
	if !r.Empty() {
		t.Fatal("a new recorder is not empty")
	}
	var out gameapi.Out = &r
	out.Notify([]byte("a"), []string{"c1"})
	out.Portal("c1", mapgen.Portal{ID: 3, TargetMapID: "tag"})
	out.Critical(record.CriticalEvent{EventID: "ev-1"})
	out.Save("c2")
	if r.Empty() || len(r.Notes) != 1 || r.Notes[0].CharacterIDs[0] != "c1" || r.Portals[0].Portal.TargetMapID != "tag" ||
		r.Criticals[0].EventID != "ev-1" || r.Saves[0] != "c2" {
		t.Fatalf("recorded %+v", r)
	}
	notes := cap(r.Notes)
	r.Reset()
	if !r.Empty() || cap(r.Notes) != notes {
		t.Fatalf("after Reset %+v (room %d, had %d): the kit reuses it every tick", r, cap(r.Notes), notes)
	}
}

func TestNewEventID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := gameapi.NewEventID()
		if !strings.HasPrefix(id, "ev-") || len(id) != 27 || seen[id] {
			t.Fatalf("event id %q: want ev- and 24 hex digits, never twice", id)
		}
		seen[id] = true
	}
}

// TestGames_KeepTheAPI runs what the kit does with any game through both games of the
// repository, the reference game and tag: build from a template, join two characters
// (one carrying attributes of another game), welcome them, step, snapshot (each sees
// itself as the entity Join named), push their state, and see them leave.
func TestGames_KeepTheAPI(t *testing.T) {
	for _, tt := range []struct {
		name, mapID string
		build       gameapi.New
	}{
		{"Reference", mapgen.DefaultMapID, game.Build(game.Options{ViewCap: game.DefaultViewCap})},
		{"Tag", "tag", tag.New},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := mapgen.Template(tt.mapID)
			if err != nil {
				t.Fatal(err)
			}
			w, err := mapgen.Generate(cfg)
			if err != nil {
				t.Fatal(err)
			}
			g, err := tt.build(gameapi.Setup{Config: cfg, World: w, TickHz: 30, SnapshotHz: 15})
			if err != nil {
				t.Fatal(err)
			}
			const carried = `{"skills":{"melee":2},"someGame":{"level":9}}`
			sp := w.Spawns[0]
			arrivals := []gameapi.Arrival{
				{CharacterID: "c1", State: &record.CharacterState{MapID: cfg.MapID, X: float64(sp.X) / 100, Y: float64(sp.Y) / 100,
					Attributes: json.RawMessage(carried)}},
				{CharacterID: "c2", Guest: true},
			}
			entities := map[string]uint64{}
			for _, a := range arrivals {
				e, err := g.Join(a)
				if err != nil || e == 0 {
					t.Fatalf("join %s: entity %d, %v", a.CharacterID, e, err)
				}
				entities[a.CharacterID] = e
			}
			if _, err := g.Join(arrivals[0]); err == nil {
				t.Fatal("a character joined twice")
			}
			before := g.Stats().Entities
			var out gameapi.Recorder
			g.Step(&out)
			for id, e := range entities {
				frame, full := g.Welcome(id).View.Snapshot(nil)
				s, err := wire.NewDecoder(0).Decode(frame)
				if err != nil || !full || s.Self < 0 {
					t.Fatalf("%s's first snapshot: %v (full %v, self %d)", id, err, full, s.Self)
				}
				var self uint64
				for _, en := range s.Entities {
					if en.Slot == s.Self {
						self = en.ID
					}
				}
				if self != e {
					t.Fatalf("%s sees itself as entity %d, Join named %d", id, self, e)
				}
			}
			st, ok := g.State("c1")
			var got, want map[string]any
			_ = json.Unmarshal(st.Attributes, &got)
			_ = json.Unmarshal([]byte(carried), &want)
			if !ok || st.MapID != cfg.MapID || !reflect.DeepEqual(got, want) {
				t.Fatalf("state %+v: what c1 carried must pass unchanged", st)
			}
			if !json.Valid(g.InstanceState()) {
				t.Fatalf("instance state %s", g.InstanceState())
			}
			g.Leave("c2")
			if _, ok := g.State("c2"); ok || g.Stats().Entities != before-1 {
				t.Fatalf("after c2 left: entities %d (were %d)", g.Stats().Entities, before)
			}
		})
	}
}
