package game_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// TestGame_ViewCapInACrowd: in a crowd beyond the cap every client's snapshot shows at
// most the cap, always its own entity, the NPC chasing it and the player it offered a
// trade (both farther than the cap's nearest players), keeps showing the same entities while the crowd
// stands still, and the client hears how many its view holds.
func TestGame_ViewCapInACrowd(t *testing.T) {
	const capN = 20
	g, _ := mustNewGame(t)
	g.SetViewCap(capN)
	s := g.Sim()
	// An NPC facing east with a clear line of sight to the crowd 6 units east of it.
	at := clearSpot(t, s, 10)
	npc, _ := s.AddNPC(at, 1, 0)
	unit := func(q int32) float64 { return float64(q) / sim.QuantaPerUnit }
	// The target stands 6 units east of the NPC; the crowd packs in east of it, from
	// 0.25 units on, so the target's capN-1 nearest are all players.
	place := func(id string, x, y int32) {
		t.Helper()
		st := &record.CharacterState{MapID: mapgen.DefaultMapID, X: unit(x), Y: unit(y)}
		if err := join(g, id, st); err != nil {
			t.Fatal(err)
		}
	}
	tx, ty := at.X+6*sim.QuantaPerUnit, at.Y
	place("target", tx, ty)
	ids := []string{"target"}
	for i := range 120 {
		id := fmt.Sprintf("p%d", i)
		place(id, tx+int32(1+i%12)*sim.QuantaPerUnit/4, ty+int32(i/12-5)*sim.QuantaPerUnit/4)
		ids = append(ids, id)
	}
	// The target offers p119, at the crowd's far corner 3.2 units away, a trade.
	offerSword(t, g, "target", "p119")
	views := make(map[string]gameapi.View, len(ids))
	decs := make(map[string]*wire.Decoder, len(ids))
	for _, id := range ids {
		views[id], decs[id] = view(g, id), wire.NewDecoder(0)
	}
	capped := map[string]game.ViewCapped{}
	chased := int32(-1)
	var shownBefore map[string][]int32
	for tick := 0; tick < 400 && (chased < 0 || shownBefore == nil); tick++ {
		for _, ev := range step(g) {
			var e struct {
				Name string
				Data game.ViewCapped
			}
			if ev.Frame != nil && json.Unmarshal(ev.Frame, &e) == nil && e.Name == "view_capped" {
				capped[ev.CharacterIDs[0]] = e.Data
			}
		}
		if tick%2 != 0 {
			continue
		}
		shown := map[string][]int32{}
		selfs := map[string]int32{}
		for _, id := range ids {
			frame, _ := views[id].Snapshot(nil)
			snap, err := decs[id].Decode(frame)
			if err != nil {
				t.Fatal(err)
			}
			views[id].Ack(uint64(snap.Tick))
			if len(snap.Entities) > capN || snap.Find(snap.Self) == nil {
				t.Fatalf("%s sees %d entities (cap %d), itself shown: %v", id, len(snap.Entities), capN, snap.Find(snap.Self) != nil)
			}
			if target := s.Chases(npc); target == snap.Self {
				if snap.Find(npc) == nil {
					t.Fatalf("%s is chased by the NPC in slot %d and its snapshot leaves it out", id, npc)
				}
				chased = target
			}
			for _, e := range snap.Entities {
				shown[id] = append(shown[id], e.Slot)
			}
			selfs[id] = snap.Self
		}
		if !slices.Contains(shown["target"], selfs["p119"]) || !slices.Contains(shown["p119"], selfs["target"]) {
			t.Fatalf("trade partners left out of each other's view: target sees %v, p119 (slot %d) sees %v", shown["target"], selfs["p119"], shown["p119"])
		}
		if chased >= 0 {
			shownBefore = shown
		}
	}
	if chased < 0 {
		t.Fatal("the NPC never chased anyone")
	}
	if c, ok := capped["p60"]; !ok || c.Shown != capN || c.InView <= capN {
		t.Fatalf("p60 heard view_capped %+v (%v), want shown %d of more", c, ok, capN)
	}
	// The crowd stands still: the next snapshot shows the same entities to everyone
	// not chased (the chasing NPC walks).
	step(g)
	step(g)
	for _, id := range ids {
		frame, _ := views[id].Snapshot(nil)
		snap, err := decs[id].Decode(frame)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Self == chased {
			continue
		}
		var now []int32
		for _, e := range snap.Entities {
			if e.Slot != npc {
				now = append(now, e.Slot)
			}
		}
		var before []int32
		for _, sl := range shownBefore[id] {
			if sl != npc {
				before = append(before, sl)
			}
		}
		if fmt.Sprint(now) != fmt.Sprint(before) {
			t.Fatalf("%s: a still crowd swapped who is shown: %v then %v", id, before, now)
		}
	}
}

// TestGame_ViewUnderTheCapShowsAll: a view under the cap shows every entity of its
// cells and raises no view_capped event.
func TestGame_ViewUnderTheCapShowsAll(t *testing.T) {
	g, _ := mustNewGame(t)
	if err := join(g, "c1", nil); err != nil {
		t.Fatal(err)
	}
	g.SetViewCap(0)
	v0 := view(g, "c1")
	step(g)
	f0, _ := v0.Snapshot(nil)
	all, err := wire.NewDecoder(0).Decode(f0)
	if err != nil {
		t.Fatal(err)
	}
	g.SetViewCap(len(all.Entities))
	v := view(g, "c1")
	for range 40 {
		for _, ev := range step(g) {
			if ev.Frame != nil && json.Valid(ev.Frame) && string(ev.Frame) != "" {
				var e struct{ Name string }
				if json.Unmarshal(ev.Frame, &e) == nil && e.Name == "view_capped" {
					t.Fatalf("view_capped under the cap: %s", ev.Frame)
				}
			}
		}
	}
	f, _ := v.Snapshot(nil)
	snap, err := wire.NewDecoder(0).Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Entities) < len(all.Entities)-2 || len(all.Entities) < 2 {
		t.Fatalf("under the cap %d shown of %d", len(snap.Entities), len(all.Entities))
	}
}

// offerSword gives from a sword and has it offer the sword to to: an open trade.
func offerSword(t *testing.T, g *game.Game, from, to string) {
	t.Helper()
	g.Carry(from, []items.Item{{ID: "sword-1", TemplateID: "sword", Quantity: 1, Place: items.Place{CharacterID: from}, State: items.StateActive}})
	offer, err := g.Decode(game.FeatureItems, game.ActionOffer, json.RawMessage(`{"toCharacterId":"`+to+`","itemId":"sword-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := refused(g, from, offer); err != nil {
		t.Fatal(err)
	}
}

// TestGame_CrowdSnapshotsDoNotAllocate: once a standing crowd beyond the cap has been
// sent enough rounds (200: the default map's NPCs wandering through its view have grown
// every scratch buffer to its size), building its snapshots allocates nothing per
// client: the grid
// query, the cap's selection and the encoder's records all reuse the game's scratch.
// (A view's slot list once landed in the cap's buffer, so the next grid query of a
// thousand slots grew a fresh array for every capped client, every snapshot.)
func TestGame_CrowdSnapshotsDoNotAllocate(t *testing.T) {
	g, _ := mustNewGame(t)
	g.SetViewCap(32)
	at := clearSpot(t, g.Sim(), 10)
	unit := func(q int32) float64 { return float64(q) / sim.QuantaPerUnit }
	views := make([]gameapi.View, 0, 200)
	for i := range 200 {
		id := fmt.Sprintf("p%d", i)
		st := &record.CharacterState{MapID: mapgen.DefaultMapID, X: unit(at.X) + float64(i%20)/4, Y: unit(at.Y) + float64(i/20)/4}
		if err := join(g, id, st); err != nil {
			t.Fatal(err)
		}
		views = append(views, view(g, id))
	}
	buf := make([]byte, 0, 1<<16)
	var out gameapi.Recorder // reused, as the kit's is
	round := func() {
		g.Step(&out)
		out.Reset()
		for _, v := range views {
			frame, _ := v.Snapshot(buf[:0])
			if len(frame) == 0 {
				t.Fatal("a crowd member was sent no snapshot")
			}
			v.Ack(g.Sim().Tick())
		}
	}
	for range 200 {
		round()
	}
	if perClient := testing.AllocsPerRun(10, round) / float64(len(views)); perClient > 0.05 {
		t.Fatalf("%.2f allocations per client and snapshot, want none", perClient)
	}
}
