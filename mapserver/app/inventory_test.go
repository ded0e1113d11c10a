package app_test

import (
	"context"
	"testing"
)

// entryIDs lists the item ids of an inventory event's data.
func entryIDs(inv map[string]any) []string {
	var ids []string
	for _, e := range inv["entries"].([]any) {
		ids = append(ids, e.(map[string]any)["itemId"].(string))
	}
	return ids
}

// TestInventory_FollowsTheCharacter joins a character, which is told its (empty)
// inventory right after its welcome; picks an item up, after which the inventory holds
// it; and joins it again on a map started afresh against the same orchestrator store:
// it arrives carrying the item, and the item is not on the ground.
func TestInventory_FollowsTheCharacter(t *testing.T) {
	f := mustOpenFakeOrch(t)
	m := mustOpenMap(t, f, nil)
	list, err := f.DB.InstanceItems(context.Background(), "dev-1", nil)
	if err != nil || len(list) == 0 {
		t.Fatalf("the map seeded no items: %v", err)
	}
	it := list[0]
	const key = "InvK3yAbCdEfGhIjKlMnOpQr"
	a, _ := joinNear(t, f, m, key, it, 0)
	if inv := a.nextInventory(); len(entryIDs(inv)) != 0 || inv["speed"] != float64(5) || inv["weightLimit"] != float64(25000) {
		t.Fatalf("first inventory %v", inv)
	}
	a.send(`{"v":1,"kind":"command","seq":1,"feature":"items","action":"pickup","payload":{"itemId":"` + it.ID + `"}}`)
	if ack := a.next(); ack["kind"] != "ack" {
		t.Fatalf("got %v, want the pickup's ack", ack)
	}
	if inv := a.nextInventory(); len(entryIDs(inv)) != 1 || entryIDs(inv)[0] != it.ID {
		t.Fatalf("inventory after the pickup %v", inv)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	again := mustOpenMap(t, f, nil)
	b, _ := joinNear(t, f, again, key, it, 0)
	if inv := b.nextInventory(); len(entryIDs(inv)) != 1 || entryIDs(inv)[0] != it.ID {
		t.Fatalf("inventory on the restarted map %v", inv)
	}
	b.send(`{"v":1,"kind":"command","seq":1,"feature":"items","action":"pickup","payload":{"itemId":"` + it.ID + `"}}`)
	if e := b.next(); e["kind"] != "error" || e["code"] != "item_not_found" {
		t.Fatalf("the held item lies on the restarted map's ground too: %v", e)
	}
}
