package game_test

import (
	"encoding/json"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

func mustNewGame(t *testing.T) (*game.Game, *mapgen.World) {
	t.Helper()
	return mustNewGameWith(t, nil)
}

// mustNewGameWith is mustNewGame with the default map's config changed by edit.
func mustNewGameWith(t *testing.T, edit func(*mapgen.MapConfig)) (*game.Game, *mapgen.World) {
	t.Helper()
	cfg, err := mapgen.Resolve("forest-1", mapgen.DefaultMapID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&cfg)
	}
	w, err := mapgen.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := game.New(w, cfg, 30)
	if err != nil {
		t.Fatal(err)
	}
	return g, w
}

func TestGame_SpawnCarriesStateAndMoves(t *testing.T) {
	g, _ := mustNewGame(t)
	st := &record.CharacterState{MapID: mapgen.DefaultMapID, X: 500, Y: 600, Attributes: json.RawMessage(`{"gold":7}`)}
	if err := join(g, "c1", st); err != nil {
		t.Fatal(err)
	}
	if err := join(g, "c1", st); err == nil {
		t.Fatal("spawned one character twice")
	}
	got, ok := g.State("c1")
	if !ok || got.X != 500 || got.Y != 600 || string(got.Attributes) != `{"gold":7}` || got.MapID != mapgen.DefaultMapID {
		t.Fatalf("state %+v", got)
	}
	cmd, err := g.Decode(wire.FeatureMovement, wire.ActionInputBatch, json.RawMessage(`{"inputs":[{"seq":1,"dx":0,"dy":1},{"seq":2,"dx":0,"dy":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := refused(g, "c1", cmd); err != nil {
		t.Fatal(err)
	}
	step(g)
	step(g)
	after, _ := g.State("c1")
	if after.Y <= 600 || after.X != 500 {
		t.Fatalf("after two inputs north: %+v", after)
	}
	if n := g.Stats().Entities; n != 1+g.Sim().Options().NPCs {
		t.Fatalf("entities %d", n)
	}
	g.Leave("c1")
	if _, ok := g.State("c1"); ok || g.Sim().PlayerCount() != 0 {
		t.Fatal("despawned character still there")
	}
}

func TestGame_DecodeErrorsCarryCodes(t *testing.T) {
	g, _ := mustNewGame(t)
	for _, tc := range []struct{ feature, action, payload, code string }{
		{"movement", "input_batch", `{"inputs":[]}`, wire.CodeBadPayload},
		{"movement", "input_batch", `{"inputs":[{"seq":1,"dx":300,"dy":0}]}`, wire.CodeBadDirection},
		{"chat", "say", `{}`, wire.CodeUnknownCommand},
	} {
		if _, err := g.Decode(tc.feature, tc.action, json.RawMessage(tc.payload)); apierr.Code(err) != tc.code {
			t.Errorf("%s/%s %s: %v, want %s", tc.feature, tc.action, tc.payload, err, tc.code)
		}
	}
}

// TestGame_SnapshotsFullThenDelta decodes the view's frames: full, then deltas against
// the acknowledged tick, with the character's own slot and last input seq.
func TestGame_SnapshotsFullThenDelta(t *testing.T) {
	g, _ := mustNewGame(t)
	if err := join(g, "c1", nil); err != nil {
		t.Fatal(err)
	}
	v := view(g, "c1")
	dec := wire.NewDecoder(0)
	step(g)
	frame, full := v.Snapshot(nil)
	s, err := dec.Decode(frame)
	if err != nil || !full || !s.Full || s.Find(s.Self) == nil {
		t.Fatalf("first snapshot %+v (%v)", s, err)
	}
	v.Ack(uint64(s.Tick))
	cmd, _ := g.Decode("movement", "input_batch", json.RawMessage(`{"inputs":[{"seq":1,"dx":1,"dy":0}]}`))
	refused(g, "c1", cmd)
	step(g)
	frame, full = v.Snapshot(nil)
	d, err := dec.Decode(frame)
	if err != nil || full || d.Full || d.BaseTick != s.Tick || d.Seq != 1 {
		t.Fatalf("second snapshot %+v (%v)", d, err)
	}
	if d.Find(d.Self).X <= s.Find(s.Self).X {
		t.Fatal("the delta does not show the move east")
	}
}

// TestGame_SnapshotsCarryEntityState: an entity's facing, kind-specific state and
// template reach the client, at spawn and when they change.
func TestGame_SnapshotsCarryEntityState(t *testing.T) {
	g, _ := mustNewGame(t)
	if err := join(g, "c1", nil); err != nil {
		t.Fatal(err)
	}
	v := view(g, "c1")
	dec := wire.NewDecoder(0)
	step(g)
	frame, _ := v.Snapshot(nil)
	s, err := dec.Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	self := s.Self
	e := &g.Sim().Entities[self]
	e.Facing, e.State, e.Template = 64, sim.ItemPending, 7
	v.Ack(uint64(s.Tick))
	step(g)
	frame, full := v.Snapshot(nil)
	d, err := dec.Decode(frame)
	if err != nil || full {
		t.Fatalf("delta %+v (%v)", d, err)
	}
	if got := d.Find(self); got.Facing != 64 || got.State != sim.ItemPending || got.Template != 7 {
		t.Fatalf("delta shows %+v, want facing 64, state 1, template 7", got.EntityState)
	}
	// A new client sees the same state in its full snapshot.
	frame, _ = view(g, "c1").Snapshot(nil)
	f, err := wire.NewDecoder(0).Decode(frame)
	if err != nil || *f.Find(self) != *d.Find(self) {
		t.Fatalf("full snapshot shows %+v, the delta %+v (%v)", f.Find(self), d.Find(self), err)
	}
}

// TestGame_PortalEntered walks a character into a portal of the default map and gets
// the portal event naming the character and the portal's target.
func TestGame_PortalEntered(t *testing.T) {
	g, w := mustNewGame(t)
	if len(w.Portals) == 0 {
		t.Fatal("the default map has no portal")
	}
	p := w.Portals[0]
	// Start one unit west of the trigger circle and walk east.
	x := float64(p.X-p.Radius)/100 - 1
	if err := join(g, "c1", &record.CharacterState{MapID: mapgen.DefaultMapID, X: x, Y: float64(p.Y) / 100}); err != nil {
		t.Fatal(err)
	}
	var inputs []sim.Input
	for i := 1; i <= 30; i++ {
		inputs = append(inputs, sim.Input{Seq: uint64(i), DX: 1})
	}
	cmd, err := g.Decode("movement", "input_batch", wire.EncodeInputBatch(nil, inputs))
	if err != nil {
		t.Fatal(err)
	}
	refused(g, "c1", cmd)
	for range 60 {
		for _, ev := range stepOut(g).Portals {
			if ev.CharacterID != "c1" || ev.Portal.ID != p.ID || ev.Portal.TargetMapID != p.TargetMapID {
				t.Fatalf("event %+v, want c1 in portal %+v", ev, p)
			}
			return
		}
	}
	st, _ := g.State("c1")
	t.Fatalf("no portal event; the character stands at %v,%v, the portal at %v,%v r %v", st.X, st.Y, float64(p.X)/100, float64(p.Y)/100, float64(p.Radius)/100)
}

// TestGame_PerceptionEventReachesViewers: an NPC that notices a player changes state,
// and the "npc_state" event goes to the characters that see the NPC.
// clearSpot returns a spawn point with a clear line of sight to units east of it.
func clearSpot(t *testing.T, s *sim.State, units int32) sim.Vec {
	t.Helper()
	for i := range 50 {
		at := s.SpawnPoint(i)
		if s.Colliders().LineOfSight(at, sim.Vec{X: at.X + units*sim.QuantaPerUnit, Y: at.Y}) {
			return at
		}
	}
	t.Fatal("no spawn point with a clear line of sight")
	return sim.Vec{}
}

func TestGame_PerceptionEventReachesViewers(t *testing.T) {
	g, _ := mustNewGame(t)
	s := g.Sim()
	// A spot with a clear line of sight 4 units east of an NPC facing east.
	at := clearSpot(t, s, 4)
	npc, id := s.AddNPC(at, 1, 0)
	player := sim.Vec{X: s.Entities[npc].Pos.X + 4*sim.QuantaPerUnit, Y: s.Entities[npc].Pos.Y}
	if err := join(g, "watcher", &record.CharacterState{MapID: mapgen.DefaultMapID, X: float64(player.X) / 16, Y: float64(player.Y) / 16}); err != nil {
		t.Fatal(err)
	}
	var got []wire.NPCState
	for range 60 {
		for _, ev := range step(g) {
			if ev.Frame == nil {
				continue
			}
			var e struct {
				Kind, Name string
				Data       wire.NPCState
			}
			if err := json.Unmarshal(ev.Frame, &e); err != nil {
				t.Fatal(err)
			}
			if e.Kind != "event" || e.Name != "npc_state" || len(ev.CharacterIDs) == 0 {
				t.Fatalf("event %s to %v", ev.Frame, ev.CharacterIDs)
			}
			if e.Data.ID == uint64(id) {
				found := false
				for _, v := range ev.CharacterIDs {
					found = found || v == "watcher"
				}
				if !found {
					t.Fatalf("the watcher does not get the event of the NPC it sees: viewers %v", ev.CharacterIDs)
				}
				got = append(got, e.Data)
			}
		}
	}
	if len(got) < 3 || got[0].From != "idle" || got[0].To != "suspicious" || got[len(got)-1].To != "chasing" {
		t.Fatalf("events %+v, want idle → suspicious … → chasing", got)
	}
}
