package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/app"
	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapenv"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// besidePortal saves a character (with attributes) one unit west of src's portal to
// frontier, welcomes it on src, and walks it east into the portal.
func besidePortal(t *testing.T, f *fakeOrch, src *app.Main, authKey string) (*gamer, string) {
	t.Helper()
	var portal mapgen.Portal
	for _, p := range src.World().Portals {
		if p.TargetMapID == "frontier" {
			portal = p
			break
		}
	}
	if portal.ID == 0 {
		t.Fatal("the default map has no portal to frontier")
	}
	j := f.join(t, `{"authKey":"`+authKey+`"}`)
	payload, _ := json.Marshal(record.CharacterStatePayload{
		MapID: mapgen.DefaultMapID, InstanceID: "dev-1", Attributes: json.RawMessage(`{"gold":12}`),
		X: float64(portal.X-portal.Radius)/100 - 1, Y: float64(portal.Y) / 100,
	})
	env := record.NewSnapshotEnvelope("test", 1, time.Now().UnixMilli(), payload)
	if _, err := f.DB.PutSnapshot(context.Background(), "dev-1", record.CharacterPartition(j.CharacterID), 1, env); err != nil {
		t.Fatal(err)
	}
	g := &gamer{player: dialMap(t, src), dec: wire.NewDecoder(0)}
	g.send(`{"v":1,"kind":"hello","ticket":"` + j.Ticket + `"}`)
	if w := g.next(); w["kind"] != "welcome" {
		t.Fatalf("got %v, want welcome", w)
	}
	var inputs []sim.Input
	for i := 1; i <= 30; i++ {
		inputs = append(inputs, sim.Input{Seq: uint64(i), DX: 1})
	}
	g.send(fmt.Sprintf(`{"v":1,"kind":"command","seq":1,"feature":"movement","action":"input_batch","payload":%s}`, wire.EncodeInputBatch(nil, inputs)))
	return g, j.CharacterID
}

// TestPortal_TransferToSecondMap walks a saved character into the default map's portal
// to frontier: the source map asks for the transfer, sends the client its token and
// closes; the client says hello to the second map with it and arrives next to
// frontier's portal back, carrying its attributes.
func TestPortal_TransferToSecondMap(t *testing.T) {
	f := mustOpenFakeOrch(t)
	src := mustOpenMap(t, f, nil)
	dst := mustOpenMap(t, f, func(c *mapenv.Config) { c.InstanceID, c.MapID = "frontier-1", "frontier" })

	g, characterID := besidePortal(t, f, src, "P0rtalK3yAbCdEfGhIjKlMnOp")
	tr := g.next()
	if tr["kind"] != "transfer" || tr["toInstanceId"] != "frontier-1" || tr["ws"] != public.WSPath("frontier-1") || tr["token"] == "" {
		t.Fatalf("got %v, want a transfer to frontier-1", tr)
	}
	g.wantClose(websocket.CloseNormalClosure)
	waitFor(t, "the source to let the character go", func() bool { return src.Loop.Players() == 0 })

	a := &gamer{player: dialMap(t, dst), dec: wire.NewDecoder(0)}
	a.send(`{"v":1,"kind":"hello","ticket":"` + tr["token"].(string) + `"}`)
	w := a.next()
	if w["kind"] != "welcome" || w["characterId"] != characterID || w["transferId"] != tr["transferId"] || w["instanceId"] != "frontier-1" {
		t.Fatalf("destination welcome %v", w)
	}
	s := a.snapshotWhere("the arrival", func(s *wire.Snapshot) bool { return self(s) != nil })
	want := game.ArrivalPoint(dst.World(), "frontier", &record.CharacterState{MapID: mapgen.DefaultMapID})
	if want.Via != "portal" {
		t.Fatalf("frontier has no portal back to default: %+v", want)
	}
	got := self(s)
	if dx, dy := float64(got.X)/sim.QuantaPerUnit-want.X, float64(got.Y)/sim.QuantaPerUnit-want.Y; math.Hypot(dx, dy) > 0.1 {
		t.Fatalf("arrived at %v,%v, want next to the portal back at %v,%v", float64(got.X)/16, float64(got.Y)/16, want.X, want.Y)
	}

	// The destination's pushes carry what the character owns.
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	snap, err := f.DB.Snapshot(context.Background(), "frontier-1", record.CharacterPartition(characterID))
	if err != nil {
		t.Fatal(err)
	}
	var pushed record.CharacterStatePayload
	if err := json.Unmarshal(snap.Envelope.Payload, &pushed); err != nil || string(pushed.Attributes) != `{"gold":12}` || pushed.MapID != "frontier" {
		t.Fatalf("pushed %s (%v)", snap.Envelope.Payload, err)
	}
}

// TestPortal_DeniedStays walks a character into a portal whose destination is not
// running: the orchestrator refuses the transfer, the player gets the reason in an event
// and keeps playing where it stands.
func TestPortal_DeniedStays(t *testing.T) {
	f := mustOpenFakeOrch(t)
	src := mustOpenMap(t, f, nil)
	g, _ := besidePortal(t, f, src, "D3niedK3yAbCdEfGhIjKlMnOp")
	ev := g.next()
	if ev["kind"] != "event" || ev["name"] != "transfer_denied" || ev["code"] != apierr.EMAPUNAVAILABLE {
		t.Fatalf("got %v, want transfer_denied map_unavailable", ev)
	}
	if src.Loop.Players() != 1 {
		t.Fatal("the denied character left the map")
	}
	g.send(`{"v":1,"kind":"command","seq":2,"feature":"movement","action":"input_batch","payload":{"inputs":[{"seq":31,"dx":0,"dy":1}]}}`)
	g.snapshotWhere("input 31 after the denial", func(s *wire.Snapshot) bool { return s.Seq == 31 })
}
