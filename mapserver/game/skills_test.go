package game_test

import (
	"encoding/json"
	"testing"
)

// TestInventory_TellsSkills: the inventory event carries the character's skills, so a
// client offers Equip only on items whose requirement they meet (skill_gate otherwise).
func TestInventory_TellsSkills(t *testing.T) {
	g := equipGame(t)
	for id, want := range map[string]string{"c1": `{"melee":1}`, "c2": `{}`} {
		var frame struct {
			Data struct {
				Skills json.RawMessage `json:"skills"`
			} `json:"data"`
		}
		if err := json.Unmarshal(g.InventoryFrame(id), &frame); err != nil {
			t.Fatal(err)
		}
		if got := string(frame.Data.Skills); got != want {
			t.Errorf("%s's inventory event says skills %s, want %s", id, got, want)
		}
	}
}
