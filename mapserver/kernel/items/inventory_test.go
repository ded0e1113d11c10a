package items_test

import (
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/items"
)

func TestEncumbrance(t *testing.T) {
	for _, tc := range []struct {
		weight, limit int64
		want          int32
	}{
		{0, 25000, 1000},
		{25000, 25000, 1000},
		{25001, 25000, 999},
		{50000, 25000, 500},
		{100000, 25000, 250},
		{1 << 40, 25000, items.MinSpeedPermille},
		{10, 0, 1000},
	} {
		if got := items.Encumbrance(tc.weight, tc.limit); got != tc.want {
			t.Errorf("Encumbrance(%d, %d)=%d, want %d", tc.weight, tc.limit, got, tc.want)
		}
	}
}

func TestInventory(t *testing.T) {
	cat := items.DefaultCatalog()
	entry := func(id, tmpl string, q int64, c items.Compartment) items.Entry {
		return items.Entry{ItemID: id, TemplateID: tmpl, Quantity: q, Compartment: c}
	}
	full := func() *items.Inventory {
		inv := items.NewInventory(items.DefaultLayout())
		inv.Layout.Capacity[items.Backpack] = 2
		for _, e := range []items.Entry{entry("s", "sword", 1, items.Backpack), entry("p", "potion", 3, items.Belt), entry("c", "coin", 100, items.Backpack)} {
			if err := inv.Add(cat, e); err != nil {
				t.Fatal(err)
			}
		}
		return inv
	}
	t.Run("Refusals", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			e    items.Entry
			code string
		}{
			{"UnknownTemplate", entry("x", "lamp", 1, items.Belt), items.CodeUnknownTemplate},
			{"AlreadyHeld", entry("s", "sword", 1, items.Belt), items.CodeExists},
			{"OverStack", entry("x", "apple", 21, items.Belt), items.CodeQuantity},
			{"NoSuchCompartment", entry("x", "apple", 1, "pocket"), items.CodeIllegalSlot},
			{"WrongSlot", entry("x", "shield", 1, items.Head), items.CodeIllegalSlot},
			{"HeavyOnBelt", entry("x", "shield", 1, items.Belt), items.CodeIllegalSlot},
			{"BackpackFull", entry("x", "apple", 1, items.Backpack), items.CodeInventoryFull},
			{"LightUnitsFitTheBelt", entry("x", "coin", 1000, items.Belt), ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				inv := full()
				err := inv.Add(cat, tc.e)
				if items.CodeOf(err) != tc.code {
					t.Fatalf("err=%v, want code %q", err, tc.code)
				}
			})
		}
		inv := full()
		inv.Layout.MaxWeightGrams = 5000
		if err := inv.Add(cat, entry("x", "shield", 1, items.OffHand)); items.CodeOf(err) != items.CodeTooHeavy {
			t.Fatalf("err=%v, want %s", err, items.CodeTooHeavy)
		}
	})
	t.Run("WeightSlowsCarrier", func(t *testing.T) {
		inv := full()
		if got := inv.WeightGrams(cat); got != 2500+900+1000 {
			t.Fatalf("weight=%d", got)
		}
		if inv.SpeedPermille(cat) != items.FullSpeedPermille {
			t.Fatal("slowed under the limit")
		}
		inv.Layout.WeightLimitGrams = 2200
		if got := inv.SpeedPermille(cat); got != 500 {
			t.Fatalf("speed=%d, want 500", got)
		}
	})
	t.Run("Remove", func(t *testing.T) {
		inv := full()
		if left, err := inv.Remove("c", 40); err != nil || left != 60 {
			t.Fatalf("left=%d err=%v", left, err)
		}
		if _, err := inv.Remove("c", 61); items.CodeOf(err) != items.CodeQuantity {
			t.Fatalf("err=%v", err)
		}
		if left, err := inv.Remove("c", 60); err != nil || left != 0 {
			t.Fatalf("left=%d err=%v", left, err)
		}
		if _, ok := inv.Find("c"); ok {
			t.Fatal("emptied entry kept")
		}
		if _, err := inv.Remove("c", 1); items.CodeOf(err) != items.CodeItemNotFound {
			t.Fatalf("err=%v", err)
		}
	})
	t.Run("Equip", func(t *testing.T) {
		inv := full()
		if err := inv.Equip(cat, "s", items.SlotMainHand, nil); items.CodeOf(err) != items.CodeSkillGate {
			t.Fatalf("err=%v, want %s", err, items.CodeSkillGate)
		}
		if err := inv.Equip(cat, "s", items.SlotHead, map[string]int{"melee": 1}); items.CodeOf(err) != items.CodeIllegalSlot {
			t.Fatalf("err=%v, want %s", err, items.CodeIllegalSlot)
		}
		if err := inv.Equip(cat, "p", items.SlotMainHand, nil); items.CodeOf(err) != items.CodeIllegalSlot {
			t.Fatalf("err=%v, want %s", err, items.CodeIllegalSlot)
		}
		if err := inv.Equip(cat, "nope", items.SlotMainHand, nil); items.CodeOf(err) != items.CodeItemNotFound {
			t.Fatalf("err=%v, want %s", err, items.CodeItemNotFound)
		}
		if err := inv.Equip(cat, "s", items.SlotMainHand, map[string]int{"melee": 1}); err != nil {
			t.Fatal(err)
		}
		if e, _ := inv.Find("s"); e.Compartment != items.MainHand {
			t.Fatalf("sword in %s", e.Compartment)
		}
		if err := inv.Unequip(items.SlotMainHand); err != nil {
			t.Fatal(err)
		}
		if err := inv.Unequip(items.SlotMainHand); items.CodeOf(err) != items.CodeItemNotFound {
			t.Fatalf("err=%v", err)
		}
	})
}
