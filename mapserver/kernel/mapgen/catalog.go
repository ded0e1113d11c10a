package mapgen

import "sort"

// PropShape is the collider shape of a prop kind.
type PropShape uint8

// Prop collider shapes. A prop with ShapeNone is visual only.
const (
	ShapeNone   PropShape = 0
	ShapeCircle PropShape = 1
	ShapeBox    PropShape = 2
)

// biomeMask is a set of biomes, one bit per Biome value.
type biomeMask uint16

func maskOf(bs ...Biome) biomeMask {
	var m biomeMask
	for _, b := range bs {
		m |= 1 << b
	}
	return m
}

func (m biomeMask) has(b Biome) bool { return m&(1<<b) != 0 }

// propKindDef describes one kind of prop in the built-in catalog.
type propKindDef struct {
	name     string
	biomes   biomeMask // where it may stand
	weight   int       // relative frequency among kinds allowed in a biome
	shape    PropShape
	size     int // collider radius or half width in centimetres at scale 1000
	depth    int // box half depth in permille of its half width
	minScale int // permille
	maxScale int // permille
	maxSlope int // steepest ground it stands on, permille
}

// propSetDef is one named set of prop kinds that a MapConfig can list in propSetIds.
type propSetDef struct {
	id    string
	kinds []propKindDef
}

// propCatalog is the built-in, read-only table of prop sets. Asset ids (the kind
// names) are what the browser maps to models; adding a set or appending a kind to the
// end of a set never changes existing worlds that do not list it.
var propCatalog = [...]propSetDef{
	{id: "temperate-trees", kinds: []propKindDef{
		{name: "oak", biomes: maskOf(BiomeGrassland, BiomeForest), weight: 4, shape: ShapeCircle, size: 60, minScale: 800, maxScale: 1300, maxSlope: 600},
		{name: "pine", biomes: maskOf(BiomeForest, BiomeRock), weight: 5, shape: ShapeCircle, size: 45, minScale: 800, maxScale: 1400, maxSlope: 800},
		{name: "bush", biomes: maskOf(BiomeGrassland, BiomeForest, BiomeBeach), weight: 6, shape: ShapeNone, minScale: 600, maxScale: 1200, maxSlope: 900},
		{name: "flowers", biomes: maskOf(BiomeGrassland), weight: 3, shape: ShapeNone, minScale: 700, maxScale: 1100, maxSlope: 500},
	}},
	{id: "rocks", kinds: []propKindDef{
		{name: "boulder", biomes: maskOf(BiomeGrassland, BiomeForest, BiomeDesert, BiomeRock, BiomeSnow), weight: 2, shape: ShapeCircle, size: 150, minScale: 600, maxScale: 1600, maxSlope: 1200},
		{name: "pebbles", biomes: maskOf(BiomeBeach, BiomeGrassland, BiomeDesert, BiomeRock), weight: 3, shape: ShapeNone, minScale: 700, maxScale: 1300, maxSlope: 1500},
	}},
	{id: "ruins", kinds: []propKindDef{
		{name: "pillar", biomes: maskOf(BiomeGrassland, BiomeDesert, BiomeForest), weight: 1, shape: ShapeBox, size: 70, depth: 1000, minScale: 900, maxScale: 1200, maxSlope: 300},
		{name: "wall-fragment", biomes: maskOf(BiomeGrassland, BiomeDesert), weight: 1, shape: ShapeBox, size: 200, depth: 300, minScale: 800, maxScale: 1100, maxSlope: 250},
	}},
	{id: "desert", kinds: []propKindDef{
		{name: "cactus", biomes: maskOf(BiomeDesert), weight: 4, shape: ShapeCircle, size: 40, minScale: 700, maxScale: 1400, maxSlope: 700},
		{name: "dead-tree", biomes: maskOf(BiomeDesert, BiomeRock), weight: 2, shape: ShapeCircle, size: 35, minScale: 800, maxScale: 1200, maxSlope: 700},
		{name: "dune-grass", biomes: maskOf(BiomeDesert, BiomeBeach), weight: 3, shape: ShapeNone, minScale: 600, maxScale: 1000, maxSlope: 600},
	}},
	{id: "coast", kinds: []propKindDef{
		{name: "palm", biomes: maskOf(BiomeBeach), weight: 3, shape: ShapeCircle, size: 40, minScale: 800, maxScale: 1300, maxSlope: 500},
		{name: "driftwood", biomes: maskOf(BiomeBeach), weight: 2, shape: ShapeNone, minScale: 700, maxScale: 1200, maxSlope: 400},
		{name: "reed", biomes: maskOf(BiomeWater, BiomeBeach), weight: 2, shape: ShapeNone, minScale: 600, maxScale: 1100, maxSlope: 300},
	}},
	{id: "alpine", kinds: []propKindDef{
		{name: "snow-pine", biomes: maskOf(BiomeSnow, BiomeRock), weight: 4, shape: ShapeCircle, size: 45, minScale: 700, maxScale: 1200, maxSlope: 900},
		{name: "ice-rock", biomes: maskOf(BiomeSnow), weight: 2, shape: ShapeCircle, size: 120, minScale: 600, maxScale: 1400, maxSlope: 1500},
	}},
}

// findPropSet returns the catalog index of the prop set id, or -1.
func findPropSet(id string) int {
	for i := range propCatalog {
		if propCatalog[i].id == id {
			return i
		}
	}
	return -1
}

// PropSetIDs returns the ids of the built-in prop sets, sorted. These are the values
// MapConfig.PropSetIDs may contain.
func PropSetIDs() []string {
	ids := make([]string, len(propCatalog))
	for i := range propCatalog {
		ids[i] = propCatalog[i].id
	}
	sort.Strings(ids)
	return ids
}

// PropKindNames returns the name of every prop kind of every built-in prop set, in
// catalog order: the names an asset set's props are keyed by.
func PropKindNames() []string {
	var names []string
	for i := range propCatalog {
		for _, k := range propCatalog[i].kinds {
			names = append(names, k.name)
		}
	}
	return names
}
