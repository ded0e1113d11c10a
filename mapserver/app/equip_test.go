package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapenv"
)

// TestEquip_OverTheWire picks up a piece of equipment through a real map and the fake
// orchestrator's real store and wears it: every equipment command is answered with
// equip_result carrying its seq, a refusal keeps the connection, and a repeated seq is
// ignored.
func TestEquip_OverTheWire(t *testing.T) {
	f := mustOpenFakeOrch(t)
	m := mustOpenMap(t, f, nil)
	list, err := f.DB.InstanceItems(context.Background(), "dev-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var it items.Item
	for _, x := range list {
		if tpl, _ := items.DefaultCatalog().Template(x.TemplateID); tpl.Slot != items.SlotNone && tpl.Requires == nil {
			it = x
			break
		}
	}
	if it.ID == "" {
		t.Fatal("the map seeded no equipment without a skill gate")
	}
	slot, _ := items.DefaultCatalog().Template(it.TemplateID)
	a, _ := joinNear(t, f, m, "Ad4K3yAbCdEfGhIjKlMnOpQr", it, 0)

	a.send(`{"v":1,"kind":"command","seq":1,"feature":"equipment","action":"equip","payload":{"itemId":"` + it.ID + `","slot":"` + string(slot.Slot) + `"}}`)
	if r := a.next(); r["name"] != game.EventEquipResult || result(r)["success"] != false || result(r)["code"] != items.CodeItemNotFound || result(r)["seq"] != float64(1) {
		t.Fatalf("equip of an item lying on the ground: %v", r)
	}
	a.send(`{"v":1,"kind":"command","seq":2,"feature":"items","action":"pickup","payload":{"itemId":"` + it.ID + `"}}`)
	if ack := a.next(); ack["kind"] != "ack" || ack["seq"] != float64(2) {
		t.Fatalf("pickup: %v", ack)
	}
	if ev := a.next(); ev["name"] != "item_picked" {
		t.Fatalf("got %v, want item_picked", ev)
	}
	equip := `{"v":1,"kind":"command","seq":3,"feature":"equipment","action":"equip","payload":{"itemId":"` + it.ID + `","slot":"` + string(slot.Slot) + `"}}`
	a.send(equip)
	r := a.next()
	if r["kind"] != "event" || r["name"] != game.EventEquipResult {
		t.Fatalf("got %v, want equip_result", r)
	}
	if d := result(r); d["success"] != true || d["seq"] != float64(3) || d["operation"] != "equip" || d["slot"] != string(slot.Slot) {
		t.Fatalf("equip: %v", d)
	}
	a.send(equip) // the same seq again
	a.send(`{"v":1,"kind":"command","seq":4,"feature":"equipment","action":"unequip","payload":{"slot":"` + string(slot.Slot) + `"}}`)
	if d := result(a.next()); d["seq"] != float64(4) || d["code"] != game.CodeEquipLocked {
		t.Fatalf("after a repeated seq, the next answer is %v, want seq 4 locked", d)
	}
	a.send(`{"v":1,"kind":"command","seq":5,"feature":"equipment","action":"equip","payload":{"itemId":"x"}}`)
	if e := a.next(); e["kind"] != "error" || e["code"] != "bad_payload" {
		t.Fatalf("malformed equip: %v", e)
	}
	a.send(`{"v":1,"kind":"ping","t":1}`)
	if p := a.next(); p["kind"] != "pong" {
		t.Fatalf("the connection did not survive the refusals: %v", p)
	}
}

// result returns an event's data object.
func result(ev map[string]any) map[string]any {
	d, _ := ev["data"].(map[string]any)
	return d
}

// TestEquip_SurvivesMapCrash wears an item on a map whose periodic push is an hour
// away, then stops the map with the orchestrator unreachable (a crash: nothing more
// reaches it) and joins the character on the map started afresh: it arrives wearing the
// item, because the map pushed its state when the equipment changed.
func TestEquip_SurvivesMapCrash(t *testing.T) {
	f := mustOpenFakeOrch(t)
	proxy, orchURL := openProxy(t, f)
	tune := func(c *mapenv.Config) { c.OrchURL, c.SnapshotPushMS = orchURL, 3_600_000 }
	m := mustOpenMap(t, f, tune)
	it, slot := unGatedEquipment(t, f)
	const key = "EqCrK3yAbCdEfGhIjKlMnOpQ"
	a, id := joinNear(t, f, m, key, it, 0)
	wantKind(t, "pickup", a.itemCommand(1, "pickup", `{"itemId":"`+it.ID+`"}`), "ack", "")
	a.send(`{"v":1,"kind":"command","seq":2,"feature":"equipment","action":"equip","payload":{"itemId":"` + it.ID + `","slot":"` + slot + `"}}`)
	for {
		if r := a.next(); r["name"] == game.EventEquipResult {
			if result(r)["success"] != true {
				t.Fatalf("equip: %v", r)
			}
			break
		}
	}
	waitFor(t, "the orchestrator to hold the character wearing the item", func() bool {
		st, err := f.DB.CharacterState(context.Background(), id)
		return err == nil && strings.Contains(string(st.Attributes), `"equipment":{"`+slot+`":"`+it.ID+`"}`)
	})

	proxy.set(proxyDown)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	proxy.set(proxyPass)
	again := mustOpenMap(t, f, tune)
	b, _ := joinNear(t, f, again, key, it, 0)
	eq, _ := b.nextInventory()["equipment"].(map[string]any)
	if eq[slot] != it.ID {
		t.Fatalf("after the crash the character wears %v, want %s in %s", eq, it.ID, slot)
	}
}

// unGatedEquipment returns an item the map seeded that a character without skills can
// wear, and its slot.
func unGatedEquipment(t *testing.T, f *fakeOrch) (items.Item, string) {
	t.Helper()
	list, err := f.DB.InstanceItems(context.Background(), "dev-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range list {
		if tpl, _ := items.DefaultCatalog().Template(x.TemplateID); tpl.Slot != items.SlotNone && tpl.Requires == nil {
			return x, string(tpl.Slot)
		}
	}
	t.Fatal("the map seeded no equipment without a skill gate")
	return items.Item{}, ""
}
