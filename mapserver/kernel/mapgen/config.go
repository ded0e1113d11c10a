// Package mapgen turns a MapConfig into the static world of one map: a quantized
// heightfield, biomes, props, static colliders, a walkable navigation grid, spawn points
// and portals. The map server runs it natively and the browser runs the very same code
// compiled to WebAssembly, so both sides agree on geometry and colliders; a SHA-256
// content hash of the world proves it.
//
// Everything that decides placement, ids or the hash uses integer math and a PRNG
// seeded from the config, and the generator never iterates a Go map, so the result is
// identical on every platform. The package imports only standard packages that build
// for GOOS=js GOARCH=wasm.
package mapgen

import "strings"

// SchemaVersion is the MapConfig schema this build reads and writes. Configs carrying
// another version are migrated by Parse when a migration exists and rejected otherwise,
// so an old data file never silently means something new.
const SchemaVersion = 1

// Well-known identifiers of the default map. The orchestrator lands new players there.
const (
	DefaultMapID      = "default"
	DefaultInstanceID = DefaultMapID + instanceSuffix
)

// instanceSuffix ends the id of the one instance mapyard runs of each map.
const instanceSuffix = "-1"

// InstanceOfMap is the id of the instance that serves a map, "<mapId>-1": mapyard runs
// one instance per map, so a portal or a derived map that names only the map reaches
// it. Every place that turns a map id into an instance id asks this function; the
// orchestrator asks it for every map but the deployment's default one, which its
// ORCH_DEFAULT_INSTANCE_ID serves whatever it is called.
func InstanceOfMap(mapID string) string { return mapID + instanceSuffix }

// PoolIDPrefix starts the id of every warm-pool map ("pool-<hex>"), the id a blank map
// container registers under until it is handed an instance. The rule lives here, with
// the other id rules, because three parts read it: the orchestrator refuses instance
// ids that start with it (so a pool member and an instance never share an id), the
// Docker runtime tells blank containers by it, and a map server refuses a MAP_POOL_ID
// without it.
const PoolIDPrefix = "pool-"

// IsPoolID reports whether id is a warm-pool map's id: a valid id (ValidID) that starts
// with PoolIDPrefix.
func IsPoolID(id string) bool { return strings.HasPrefix(id, PoolIDPrefix) && ValidID(id) }

// MaxSeed is the largest accepted seed: 2^53-1, the largest integer a JavaScript
// number holds exactly, so a config that passes through the browser keeps its seed.
const MaxSeed = 1<<53 - 1

// MapConfig is everything the generator needs to build one map's static world. It is
// the contract between the orchestrator (which picks or derives it), the map server
// (which generates and simulates it) and the browser (which regenerates it to draw it).
//
// Lengths are whole metres and ratios are permille (thousandths) so that a config is
// exact in JSON and in every language that reads it.
type MapConfig struct {
	// SchemaVersion must equal SchemaVersion; see Parse for migration.
	SchemaVersion int `json:"schemaVersion"`
	// MapID names the map (its template or derived identity), e.g. "default".
	MapID string `json:"mapId"`
	// InstanceID names one running copy of the map, e.g. "default-1". It becomes part
	// of the container name mapyard-map-<instanceId>.
	InstanceID string `json:"instanceId"`
	// Seed drives every random choice of the generator; at most MaxSeed.
	Seed uint64 `json:"seed"`
	// Bounds is the playable rectangle, from (0,0) to (Width,Height).
	Bounds Bounds `json:"bounds"`
	// Terrain shapes the heightfield.
	Terrain TerrainParams `json:"terrain"`
	// Biome classifies terrain cells into biomes.
	Biome BiomeParams `json:"biome"`
	// PropSetIDs lists the prop sets (see PropSetIDs) the generator may place, in the
	// order their kinds are numbered.
	PropSetIDs []string `json:"propSetIds"`
	// StaticCollider controls boundary walls and the navigation grid.
	StaticCollider StaticColliderParams `json:"staticCollider"`
	// GenerationRules holds densities and counts of generated objects.
	GenerationRules GenerationRules `json:"generationRules"`
	// AssetSets names the asset sets (docs/assets.md) the page draws this world with,
	// first one first: a sprite missing from it is looked up in the next. Empty means
	// the kit's default set, DefaultAssetSet. The world hash covers the names, not the
	// files, and an empty list adds nothing to it, so configs written before asset sets
	// keep their hash.
	AssetSets []AssetSetRef `json:"assetSets,omitempty"`
	// Image is the container image that runs this map (a Docker reference such as
	// "mapyard/tag:latest"), so that a template says which game it is a map of and a
	// portal to it starts the right one. Empty means the host's ORCH_MAP_IMAGE. It
	// says where the map runs, not what its world is: the generator never reads it and
	// the world hash does not cover it, so a map keeps its hash in any image. The
	// orchestrator keeps it in its own record of the instance and hands maps their
	// config without it.
	Image string `json:"image,omitempty"`
}

// AssetSetRef names one asset set by id and version.
type AssetSetRef struct {
	// ID is the set's id (the map id rule, ValidID), e.g. "mapyard-default".
	ID string `json:"id"`
	// Version is the set's version (ValidateAssetVersion), e.g. "1".
	Version string `json:"version"`
}

// String returns "id@version".
func (r AssetSetRef) String() string { return r.ID + "@" + r.Version }

// DefaultAssetSet is the asset set the kit ships and a map without AssetSets uses.
var DefaultAssetSet = AssetSetRef{ID: "mapyard-default", Version: "1"}

// AssetSetsOf returns the asset sets the page draws c with: c.AssetSets, or
// DefaultAssetSet alone when it names none.
func AssetSetsOf(c MapConfig) []AssetSetRef {
	if len(c.AssetSets) == 0 {
		return []AssetSetRef{DefaultAssetSet}
	}
	return c.AssetSets
}

// Bounds is the size of a map in metres. The default map is 2000 x 2000 (2 km x 2 km).
type Bounds struct {
	// Width is the extent along x in metres.
	Width int `json:"width"`
	// Height is the extent along y in metres.
	Height int `json:"height"`
}

// TerrainParams shapes the heightfield: layered integer value noise, quantized to
// centimetres at the corners of square cells.
type TerrainParams struct {
	// CellSize is the heightfield resolution in metres.
	CellSize int `json:"cellSize"`
	// MaxHeight is the highest possible terrain point in metres.
	MaxHeight int `json:"maxHeight"`
	// FeatureSize is the wavelength of the coarsest noise octave in metres: roughly the
	// distance between hills.
	FeatureSize int `json:"featureSize"`
	// Octaves is the number of noise layers; each halves the wavelength.
	Octaves int `json:"octaves"`
	// Persistence is the amplitude of each octave relative to the previous, in permille.
	Persistence int `json:"persistence"`
	// WaterLevel is the height below which terrain is water, in permille of MaxHeight.
	WaterLevel int `json:"waterLevel"`
}

// BiomeParams decides the biome of every terrain cell from its height and a moisture
// noise field.
type BiomeParams struct {
	// MoistureScale is the wavelength of the moisture noise in metres.
	MoistureScale int `json:"moistureScale"`
	// MoistureBias shifts moisture everywhere, in permille (-1000..1000).
	MoistureBias int `json:"moistureBias"`
	// BeachHeight is how far above the water level sand reaches, in metres.
	BeachHeight int `json:"beachHeight"`
	// RockLine is the height above which land is rock, in permille of MaxHeight.
	RockLine int `json:"rockLine"`
	// SnowLine is the height above which land is snow, in permille of MaxHeight.
	SnowLine int `json:"snowLine"`
	// DryBelow is the moisture (permille) below which land is desert.
	DryBelow int `json:"dryBelow"`
	// WetAbove is the moisture (permille) above which land is forest.
	WetAbove int `json:"wetAbove"`
}

// StaticColliderParams controls the static colliders and the walkable grid derived
// from terrain and colliders.
type StaticColliderParams struct {
	// NavCellSize is the side of one navigation grid cell in metres.
	NavCellSize int `json:"navCellSize"`
	// MaxWalkableSlope is the steepest walkable terrain as rise over run in permille
	// (1000 = 45 degrees).
	MaxWalkableSlope int `json:"maxWalkableSlope"`
	// BoundaryWalls adds four box colliders along the inside of the bounds.
	BoundaryWalls bool `json:"boundaryWalls"`
	// WallThickness is the thickness of boundary walls in metres.
	WallThickness int `json:"wallThickness"`
	// BlockWater makes water cells unwalkable.
	BlockWater bool `json:"blockWater"`
}

// GenerationRules holds densities and counts. PropDensity, SpawnPoints and Portals
// shape the static world; NPCDensity and InteractableDensity are read only by the map
// server, which generates dynamic entities itself, so they do not change the world hash.
type GenerationRules struct {
	// PropDensity is the number of prop placement attempts per square kilometre.
	PropDensity int `json:"propDensity"`
	// NPCDensity is the number of NPCs per square kilometre the server spawns.
	NPCDensity int `json:"npcDensity"`
	// InteractableDensity is the number of interactables per square kilometre the
	// server spawns.
	InteractableDensity int `json:"interactableDensity"`
	// SpawnPoints is the number of player spawn points.
	SpawnPoints int `json:"spawnPoints"`
	// Portals lists the portals to place, each leading to another map.
	Portals []PortalRule `json:"portals"`
}

// PortalRule asks for Count portals leading to TargetMapID, or, with Discover, to a
// newly discovered map whose config Derive builds from this one.
type PortalRule struct {
	// TargetMapID is the destination map; empty if and only if Discover is set.
	TargetMapID string `json:"targetMapId,omitempty"`
	// Count is how many portals this rule places.
	Count int `json:"count"`
	// Discover makes each portal lead to a new map derived from this one with a seed
	// chosen by the generator (see Portal.TargetSeed and Derive).
	Discover bool `json:"discover,omitempty"`
}

// Clone returns a deep copy of c, so that changing the copy's slices leaves c alone.
func (c MapConfig) Clone() MapConfig {
	if c.PropSetIDs != nil {
		c.PropSetIDs = append(make([]string, 0, len(c.PropSetIDs)), c.PropSetIDs...)
	}
	if c.GenerationRules.Portals != nil {
		c.GenerationRules.Portals = append(make([]PortalRule, 0, len(c.GenerationRules.Portals)), c.GenerationRules.Portals...)
	}
	if c.AssetSets != nil {
		c.AssetSets = append(make([]AssetSetRef, 0, len(c.AssetSets)), c.AssetSets...)
	}
	return c
}
