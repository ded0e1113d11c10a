// Package itemgen places a map's ordinary items: which items the generator puts in an
// instance, their ids, templates, quantities and positions, derived from the MapConfig
// alone. The map seeds them at the orchestrator; the browser runs the same code (it
// builds for GOOS=js GOARCH=wasm) to learn the ids of the items it sees lying in the
// world, which the snapshots name only by entity.
package itemgen

import (
	"fmt"
	"math/rand/v2"

	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/sim"
)

// stream selects the PCG stream of item placement, apart from the simulation's own.
const stream = 0x6974656d

// Generate returns the ordinary items the generator places in an instance:
// generationRules.interactableDensity per square kilometre of the bounds, each of a
// template that is neither critical nor unique, on walkable open ground, drawn from a
// generator seeded by the map seed. The ids are the instance id and a number, so the
// same instance generates the same ids on every start and the orchestrator recognises
// the ones it knows already.
func Generate(cfg mapgen.MapConfig, w *mapgen.World, cols *sim.Colliders, cat *items.Catalog) []items.Item {
	area := int64(w.Width/sim.CentimetresPerUnit) * int64(w.Height/sim.CentimetresPerUnit)
	n := int(int64(cfg.GenerationRules.InteractableDensity) * area / 1_000_000)
	var kinds []items.Template
	for _, id := range cat.IDs() {
		if t, _ := cat.Template(id); !t.Critical && !t.Unique {
			kinds = append(kinds, t)
		}
	}
	if n <= 0 || len(kinds) == 0 || !items.ValidID(cfg.InstanceID) {
		return nil
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, stream))
	bw, bh := cols.Bounds()
	out := make([]items.Item, 0, n)
	for i := range n {
		var p sim.Vec
		for try := 0; try < 64; try++ {
			p = sim.Vec{X: int32(sim.BodyRadius + rng.IntN(int(bw-2*sim.BodyRadius))), Y: int32(sim.BodyRadius + rng.IntN(int(bh-2*sim.BodyRadius)))}
			if !cols.Blocked(p) && (w.Nav.CellSize <= 0 || w.Nav.WalkableAt(sim.ToCentimetres(p.X), sim.ToCentimetres(p.Y))) {
				break
			}
		}
		p = cols.NearestOpen(p)
		t := kinds[rng.IntN(len(kinds))]
		q := int64(1)
		if t.Stackable() {
			q = 1 + rng.Int64N(min(t.MaxStack, 10))
		}
		out = append(out, items.Item{
			ID: fmt.Sprintf("%s.item-%d", cfg.InstanceID, i), TemplateID: t.ID, Quantity: q, State: items.StateActive,
			Place: items.Place{InstanceID: cfg.InstanceID, X: sim.ToCentimetres(p.X), Y: sim.ToCentimetres(p.Y)},
		})
	}
	return out
}
