package tag

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// mustArena builds the arena of the tag template as the kit would.
func mustArena(t *testing.T) *Game {
	t.Helper()
	cfg, err := mapgen.Template("tag")
	if err != nil {
		t.Fatal(err)
	}
	w, err := mapgen.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(gameapi.Setup{Config: cfg, World: w, TickHz: 30, SnapshotHz: 15})
	if err != nil {
		t.Fatal(err)
	}
	return g.(*Game)
}

// at is a state saved on the arena at (x, y) metres from its first base.
func at(g *Game, dx, dy float64, attrs string) *record.CharacterState {
	b := g.bases[0]
	st := &record.CharacterState{MapID: "tag", X: float64(b.X)/sim.QuantaPerUnit + 10 + dx, Y: float64(b.Y)/sim.QuantaPerUnit + dy}
	if attrs != "" {
		st.Attributes = json.RawMessage(attrs)
	}
	return st
}

// mustJoin joins a character and returns its entity id.
func mustJoin(t *testing.T, g *Game, id string, st *record.CharacterState) uint64 {
	t.Helper()
	e, err := g.Join(gameapi.Arrival{CharacterID: id, State: st})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// steps runs n ticks and returns what they handed the kit.
func steps(g *Game, n int) *gameapi.Recorder {
	out := &gameapi.Recorder{}
	for range n {
		g.Step(out)
	}
	return out
}

// tagged returns the "tagged" events among notes, each with who got it.
func tagged(t *testing.T, notes []gameapi.Note) []Tagged {
	t.Helper()
	var out []Tagged
	for _, n := range notes {
		var ev struct {
			Name string
			Data Tagged
		}
		if err := json.Unmarshal(n.Frame, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Name == EventTagged {
			out = append(out, ev.Data)
		}
	}
	return out
}

func TestTag_FirstToJoinIsIt(t *testing.T) {
	g := mustArena(t)
	a := mustJoin(t, g, "a", at(g, 0, 0, ""))
	mustJoin(t, g, "b", at(g, 20, 0, ""))
	if g.it != "a" {
		t.Fatalf("it is %q, want the first to join", g.it)
	}
	evs := tagged(t, steps(g, 1).Notes)
	if len(evs) != 1 || evs[0].It != a || evs[0].By != 0 {
		t.Fatalf("tagged events %+v, want one naming a", evs)
	}
}

func TestTag_TouchPassesIt(t *testing.T) {
	g := mustArena(t)
	a := mustJoin(t, g, "a", at(g, 0, 0, ""))
	b := mustJoin(t, g, "b", at(g, 0.5, 0, ""))
	steps(g, 1)
	if g.it != "a" {
		t.Fatal("a player just arrived was tagged: arrivals are shielded")
	}
	out := steps(g, ImmuneTicks)
	if g.it != "b" || g.players["a"].tags != 1 {
		t.Fatalf("it is %q, a tagged %d: a touch past the arrival's shield passes it", g.it, g.players["a"].tags)
	}
	if evs := tagged(t, out.Notes); len(evs) != 1 || evs[0].It != b || evs[0].By != a {
		t.Fatalf("tagged events %+v, want b tagged by a", evs)
	}
	t.Run("NoTagBack", func(t *testing.T) {
		steps(g, ImmuneTicks-2)
		if g.it != "b" {
			t.Fatal("b tagged a back while a was shielded")
		}
		steps(g, 2)
		if g.it != "a" {
			t.Fatalf("it is %q: once the shield is gone, a touch passes it back", g.it)
		}
	})
}

func TestTag_TagCommand(t *testing.T) {
	g := mustArena(t)
	mustJoin(t, g, "a", at(g, 0, 0, ""))
	b := mustJoin(t, g, "b", at(g, 2, 0, ""))
	far := mustJoin(t, g, "far", at(g, 30, 0, ""))
	tagCmd := func(by string, id uint64) error {
		return g.Command(by, 1, Tag{ID: id}, &gameapi.Recorder{}).Err
	}
	for _, tt := range []struct {
		name, by string
		id       uint64
		code     string
	}{
		{"ErrNotIt", "b", far, CodeNotIt},
		{"ErrNoPlayer", "a", 99999, CodeNoPlayer},
		{"ErrOutOfReach", "a", far, CodeOutOfReach},
		{"ErrShieldedOnArrival", "a", b, CodeShielded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tagCmd(tt.by, tt.id)
			if apierr.Code(err) != tt.code || !strings.HasSuffix(apierr.Message(err), ".") {
				t.Fatalf("got %v, want %s in a sentence for players", err, tt.code)
			}
		})
	}
	steps(g, ImmuneTicks)
	if err := tagCmd("a", b); err != nil || g.it != "b" {
		t.Fatalf("tag within reach: %v, it is %q", err, g.it)
	}
}

func TestTag_BasesShelterForAWhile(t *testing.T) {
	g := mustArena(t)
	b := g.bases[0]
	onBase := &record.CharacterState{MapID: "tag", X: float64(b.X) / sim.QuantaPerUnit, Y: float64(b.Y) / sim.QuantaPerUnit}
	mustJoin(t, g, "a", onBase)
	sheltered := mustJoin(t, g, "b", onBase)
	steps(g, ImmuneTicks+1)
	if g.it != "a" {
		t.Fatal("a player on a base was tagged")
	}
	if err := g.Command("a", 1, Tag{ID: sheltered}, &gameapi.Recorder{}).Err; apierr.Code(err) != CodeShielded {
		t.Fatalf("tagging a player on a base: %v", err)
	}
	// Both stepped on the base at the first tick: sheltered until tick 1+BaseTicks.
	steps(g, BaseTicks-ImmuneTicks-1)
	if g.it != "a" {
		t.Fatal("a player on a base was tagged within its shelter")
	}
	steps(g, 1)
	if g.it != "b" {
		t.Fatalf("it is %q: a base shelters for %d ticks only", g.it, BaseTicks)
	}
}

func TestTag_ItLeaves(t *testing.T) {
	g := mustArena(t)
	mustJoin(t, g, "a", at(g, 0, 0, ""))
	mustJoin(t, g, "b", at(g, 20, 0, ""))
	c := mustJoin(t, g, "c", at(g, 40, 0, ""))
	g.Leave("b")
	g.Leave("a")
	if g.it != "c" {
		t.Fatalf("it is %q after it left, want the first to join of those left", g.it)
	}
	if evs := tagged(t, steps(g, 1).Notes); len(evs) == 0 || evs[len(evs)-1].It != c {
		t.Fatalf("tagged events %+v", evs)
	}
	g.Leave("c")
	if g.it != "" {
		t.Fatalf("an empty arena has %q as it", g.it)
	}
}

// TestTag_CarriesWhatItDoesNotUnderstand: a character arrives with attributes of
// other games (skills, equipment) and a score; it leaves with them as they came while
// its score did not change, and with every other attribute unchanged once it did.
func TestTag_CarriesWhatItDoesNotUnderstand(t *testing.T) {
	g := mustArena(t)
	const attrs = `{"skills":{"melee":2},"equipment":{"head":"helmet-1"},"tag":{"tags":4},"gold":7}`
	mustJoin(t, g, "a", at(g, 0, 0, attrs))
	b := mustJoin(t, g, "b", at(g, 2, 0, ""))
	if st, _ := g.State("a"); string(st.Attributes) != attrs || st.MapID != "tag" {
		t.Fatalf("state %+v: the attributes changed with nothing to change", st)
	}
	if st, _ := g.State("b"); st.Attributes != nil {
		t.Fatalf("a new character's attributes %s", st.Attributes)
	}
	steps(g, ImmuneTicks)
	if err := g.Command("a", 1, Tag{ID: b}, &gameapi.Recorder{}).Err; err != nil {
		t.Fatal(err)
	}
	st, _ := g.State("a")
	var got map[string]json.RawMessage
	if err := json.Unmarshal(st.Attributes, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"skills": `{"melee":2}`, "equipment": `{"head":"helmet-1"}`, "gold": "7", "tag": `{"tags":5}`}
	if len(got) != len(want) {
		t.Fatalf("attributes %s", st.Attributes)
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Fatalf("attribute %s is %s, want %s", k, got[k], v)
		}
	}
}

func TestTag_PortalsBothWays(t *testing.T) {
	g := mustArena(t)
	p := g.world.Portals[0]
	if p.TargetMapID != mapgen.DefaultMapID {
		t.Fatalf("the arena's portal leads to %q", p.TargetMapID)
	}
	// Open ground between every spawn point and the portal: a player who arrives from
	// a map the arena has no portal to walks straight to it (the kit's end-to-end tests
	// do).
	for _, sp := range g.world.Spawns {
		from, to := sim.Vec{X: sim.FromCentimetres(sp.X), Y: sim.FromCentimetres(sp.Y)}, sim.Vec{X: sim.FromCentimetres(p.X), Y: sim.FromCentimetres(p.Y)}
		if !g.sim.Colliders().LineOfSight(from, to) {
			t.Errorf("spawn point %+v does not see the portal", sp)
		}
	}
	// Arriving from the default map: beside the portal back, not in it.
	mustJoin(t, g, "a", &record.CharacterState{MapID: mapgen.DefaultMapID, X: 1, Y: 1})
	pos := g.sim.Entities[g.players["a"].slot].Pos
	portal := sim.Vec{X: sim.FromCentimetres(p.X), Y: sim.FromCentimetres(p.Y)}
	if r := int64(sim.FromCentimetres(p.Radius)); near(pos, portal, r) || !near(pos, portal, r+4*sim.QuantaPerUnit) {
		t.Fatalf("arrived at %v, the portal at %v radius %d", pos, portal, r)
	}
	// Walking into it: the kit is asked for a transfer.
	dx, dy := portal.X-pos.X, portal.Y-pos.Y
	var in []sim.Input
	for i := range 60 {
		in = append(in, sim.Input{Seq: uint64(i + 1), DX: int8(max(-100, min(100, dx))), DY: int8(max(-100, min(100, dy)))})
	}
	if r := g.Command("a", 1, in, &gameapi.Recorder{}); !r.Quiet || r.Err != nil {
		t.Fatalf("movement answered %+v", r)
	}
	out := steps(g, 60)
	if len(out.Portals) != 1 || out.Portals[0].CharacterID != "a" || out.Portals[0].Portal.TargetMapID != mapgen.DefaultMapID {
		t.Fatalf("portals %+v", out.Portals)
	}
}

// TestTag_Snapshot: a client decodes the arena with the kit's decoder: the bases as
// zones of their radius, the players, the one who is it marked, a shielded one
// shielded, its own entity as self.
func TestTag_Snapshot(t *testing.T) {
	g := mustArena(t)
	a := mustJoin(t, g, "a", at(g, 0, 0, ""))
	b := mustJoin(t, g, "b", at(g, 20, 0, ""))
	steps(g, 1)
	frame, full := g.Welcome("b").View.Snapshot(nil)
	s, err := wire.NewDecoder(0).Decode(frame)
	if err != nil || !full {
		t.Fatalf("snapshot: %v (full %v)", err, full)
	}
	kinds := map[uint8]int{}
	for _, e := range s.Entities {
		kinds[e.Kind]++
		switch {
		case e.Kind == wire.EntityZone && e.Template != uint32(sim.ToCentimetres(BaseRadius)):
			t.Fatalf("base %+v: its template is its radius in centimetres", e)
		case e.ID == a && e.State != wire.PlayerMarked|wire.PlayerShielded:
			t.Fatalf("a, it and just arrived: state %#x", e.State)
		case e.ID == b && e.State != wire.PlayerShielded:
			t.Fatalf("b, just arrived: state %#x", e.State)
		}
	}
	if kinds[wire.EntityZone] != len(g.bases) || kinds[wire.EntityPlayer] != 2 || s.Self < 0 {
		t.Fatalf("entities %+v, self %d", s.Entities, s.Self)
	}
}

func TestTag_ScoresAndDecode(t *testing.T) {
	g := mustArena(t)
	mustJoin(t, g, "a", at(g, 0, 0, ""))
	cmd, err := g.Decode(Feature, ActionScores, json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	out := &gameapi.Recorder{}
	if r := g.Command("a", 7, cmd, out); !r.Quiet || len(out.Notes) != 1 || !strings.Contains(string(out.Notes[0].Frame), `"seq":7`) {
		t.Fatalf("scores answered %+v with %+v", r, out.Notes)
	}
	for _, bad := range []struct{ feature, action, payload, code string }{
		{Feature, ActionTag, `{}`, wire.CodeBadPayload},
		{Feature, ActionTag, `{"id":1,"more":2}`, wire.CodeBadPayload},
		{Feature, "hide", `{}`, wire.CodeUnknownCommand},
		{"items", "pickup", `{"itemId":"x"}`, wire.CodeUnknownCommand},
		{wire.FeatureMovement, wire.ActionInputBatch, `{"inputs":"up"}`, wire.CodeBadPayload},
	} {
		if _, err := g.Decode(bad.feature, bad.action, json.RawMessage(bad.payload)); apierr.Code(err) != bad.code {
			t.Errorf("%s/%s %s: %v, want %s", bad.feature, bad.action, bad.payload, err, bad.code)
		}
	}
}
