package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapenv"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
)

// Recovery fixture: a pass every 15 ticks; the regenerative unique "ember", used up at
// tick 0, respawns 90 ticks later; of the quota item "shard" (two anchors) copy 0 lies
// at its anchor and copy 1 was used up at tick 0 with no cooldown.
const (
	fixtureEvery    = 15
	fixtureCooldown = 90
)

// openGround returns three places on open ground of instance dev-1: next to the first
// items its world generation places.
func openGround(t *testing.T) []items.Place {
	t.Helper()
	cfg, err := mapgen.Resolve("dev-1", mapgen.DefaultMapID, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := mapgen.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := game.New(w, cfg, 30)
	if err != nil {
		t.Fatal(err)
	}
	seed := g.ItemSeed()
	out := make([]items.Place, 3)
	for i := range out {
		out[i] = seed[i].Place
		out[i].X += 50
	}
	return out
}

// recoveryStore puts the fixture's policies and item rows into f's store.
func recoveryStore(t *testing.T, f *fakeOrch, anchors []items.Place) {
	t.Helper()
	ctx := context.Background()
	for _, p := range []items.Policy{
		{ItemID: "ember", TemplateID: "ember", Type: items.RegenerativeUnique, Anchors: anchors[:1], CooldownTicks: fixtureCooldown},
		{ItemID: "shard", TemplateID: "relic-shard", Type: items.InstanceQuota, Anchors: anchors[1:]},
	} {
		if err := p.Validate(items.DefaultCatalog()); err != nil {
			t.Fatal(err)
		}
		if _, err := f.DB.PutItemPolicy(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	rows := []items.Item{
		{ID: "ember", TemplateID: "ember", Quantity: 1, Place: anchors[0], State: items.StateDestroyed},
		{ID: "shard#0", TemplateID: "relic-shard", Quantity: 1, Place: anchors[1], State: items.StateActive},
		{ID: "shard#1", TemplateID: "relic-shard", Quantity: 1, Place: anchors[2], State: items.StateDestroyed},
	}
	if err := f.DB.SeedItems(ctx, func(items.Ledger) ([]items.Item, error) { return rows, nil }); err != nil {
		t.Fatal(err)
	}
}

// audit returns the recovery audit rows, oldest first.
func audit(t *testing.T, f *fakeOrch) []orchestrator.ItemRecovery {
	t.Helper()
	rows, err := f.DB.ItemRecoveries(context.Background(), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// describe renders audit rows without their wall-clock time.
func describe(rows []orchestrator.ItemRecovery) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s %s tick=%d item=%s trigger=%s from=%s to=%s\n", r.EventID, r.InstanceID, r.Tick, r.ItemID, r.Trigger, r.From, r.To)
	}
	return b.String()
}

// runRecoveryFixture runs a real map against a fresh fake orchestrator store holding
// the fixture, until the ember is back, with a player beside its anchor, and returns
// the audit.
func runRecoveryFixture(t *testing.T) []orchestrator.ItemRecovery {
	anchors := openGround(t)
	f := mustOpenFakeOrch(t)
	recoveryStore(t, f, anchors)
	m := mustOpenMap(t, f, func(c *mapenv.Config) { c.RecoveryEveryTicks = fixtureEvery })
	if got := m.Loop.Tick(); got >= fixtureCooldown {
		t.Fatalf("the map is at tick %d before a player could join", got)
	}
	a, _ := joinNear(t, f, m, "Ad4K3yAbCdEfGhIjKlMnOpQr", items.Item{Place: anchors[0]}, 1)
	for {
		ev := a.next()
		if ev["kind"] != "event" || ev["name"] != game.EventItemRecovered {
			continue
		}
		d := result(ev)
		if d["itemId"] != "ember" {
			continue
		}
		if d["templateId"] != "ember" || d["trigger"] != items.TriggerMissing || d["id"] == nil {
			t.Fatalf("item_recovered %v", d)
		}
		// Shown only once durable: the store has the ember live at its anchor already.
		if st, n := storedItem(t, f, "ember"); n != 1 || !st.Live() || st.Place != anchors[0] {
			t.Fatalf("when the player saw it the store had %d embers, %+v", n, st)
		}
		break
	}
	rows := audit(t, f)
	if len(rows) != 2 {
		t.Fatalf("audit:\n%s", describe(rows))
	}
	// The quota copy was topped up at the first boundary; the ember at the first
	// boundary once its cooldown had passed, not before.
	if r := rows[0]; r.ItemID != "shard#1" || r.Trigger != items.TriggerQuota || r.Tick != fixtureEvery || r.To != anchors[2] || r.From != anchors[2] {
		t.Fatalf("quota top-up %s", describe(rows[:1]))
	}
	if r := rows[1]; r.ItemID != "ember" || r.Trigger != items.TriggerMissing || r.Tick != fixtureCooldown || r.To != anchors[0] ||
		r.EventID != fmt.Sprintf("recover/dev-1/%d/ember", fixtureCooldown) {
		t.Fatalf("ember respawn %s", describe(rows[1:]))
	}
	if st, n := storedItem(t, f, "shard#0"); n != 1 || !st.Live() || st.Place != anchors[1] {
		t.Fatalf("shard#0, which never left its anchor: %+v", st)
	}
	// Nothing more: a pass over the same state decides nothing.
	waitFor(t, "two more passes", func() bool { return m.Loop.Tick() >= fixtureCooldown+2*fixtureEvery })
	if more := audit(t, f); len(more) != 2 {
		t.Fatalf("more recoveries than the fixture needs:\n%s", describe(more))
	}
	return rows
}

// TestRecovery_Fixtures runs the fixture through a real map and a real store twice:
// each run writes the same audit rows.
func TestRecovery_Fixtures(t *testing.T) {
	var runs []string
	for i := range 2 {
		t.Run(fmt.Sprintf("Run%d", i+1), func(t *testing.T) { runs = append(runs, describe(runRecoveryFixture(t))) })
	}
	if len(runs) == 2 && runs[0] != runs[1] {
		t.Fatalf("the same inputs gave different audits:\n%s\nand\n%s", runs[0], runs[1])
	}
}
