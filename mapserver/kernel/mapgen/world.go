package mapgen

// Biome classifies one terrain cell. Its numeric value is part of the world hash and
// of the world JSON, so values are never renumbered.
type Biome uint8

// Biomes, decided per terrain cell from height and moisture.
const (
	BiomeWater     Biome = 0
	BiomeBeach     Biome = 1
	BiomeGrassland Biome = 2
	BiomeForest    Biome = 3
	BiomeDesert    Biome = 4
	BiomeRock      Biome = 5
	BiomeSnow      Biome = 6
	numBiomes            = 7
)

// String returns the biome's lowercase name, e.g. "grassland".
func (b Biome) String() string {
	names := [numBiomes]string{"water", "beach", "grassland", "forest", "desert", "rock", "snow"}
	if int(b) < len(names) {
		return names[b]
	}
	return "unknown"
}

// World is the static world of one map: everything the map server and the browser
// both derive from a MapConfig. All coordinates and lengths are integer centimetres,
// with x growing east from 0 to Width and y growing north from 0 to Height; heights
// (z) are centimetres above the lowest possible terrain.
//
// The instance id is deliberately not part of the world: two instances of one map share
// their static world and its hash.
type World struct {
	// SchemaVersion is the MapConfig schema the world was generated from.
	SchemaVersion int
	// MapID is the generated map's id.
	MapID string
	// Seed is the generated map's seed.
	Seed uint64
	// Width and Height are the bounds in centimetres.
	Width, Height int32
	// Terrain is the heightfield.
	Terrain Heightfield
	// Biomes holds one Biome per terrain cell, row by row from y = 0.
	Biomes []Biome
	// Nav is the walkable base grid.
	Nav NavGrid
	// PropKinds lists the kinds of the configured prop sets; Prop.Kind indexes it.
	PropKinds []PropKind
	// Props are the static, non-interactive props in generation order.
	Props []Prop
	// Colliders are the static colliders: boundary walls first, then prop colliders.
	Colliders []Collider
	// Spawns are the player spawn points.
	Spawns []SpawnPoint
	// Portals lead to other maps.
	Portals []Portal
	// AssetSets are the config's asset set names (not the kit's default when it names
	// none): the hash covers them, so a page drawing with other art knows it.
	AssetSets []AssetSetRef
}

// Heightfield is terrain height sampled at the corners of square cells.
type Heightfield struct {
	// CellSize is the side of a cell in centimetres.
	CellSize int32
	// Cols and Rows count cells; there are (Cols+1) x (Rows+1) corner samples.
	Cols, Rows int
	// Heights are corner heights in centimetres, row by row from y = 0.
	Heights []uint16
}

// At returns the terrain height in centimetres at (x, y), bilinearly interpolated with
// integer math so that every platform gets the same value. Points outside the grid are
// clamped to its edge.
func (h *Heightfield) At(x, y int32) int32 {
	c := int64(h.CellSize)
	fx, col := splitCoord(int64(x), c, h.Cols)
	fy, row := splitCoord(int64(y), c, h.Rows)
	stride := h.Cols + 1
	i := row*stride + col
	h00, h10 := int64(h.Heights[i]), int64(h.Heights[i+1])
	h01, h11 := int64(h.Heights[i+stride]), int64(h.Heights[i+stride+1])
	bottom := h00*(c-fx) + h10*fx
	top := h01*(c-fx) + h11*fx
	return int32((bottom*(c-fy) + top*fy) / (c * c))
}

// splitCoord returns the offset of v inside its cell and the cell index, clamped to
// [0, cells-1] with the offset clamped to the cell.
func splitCoord(v, cell int64, cells int) (offset int64, index int) {
	if v <= 0 {
		return 0, 0
	}
	i := v / cell
	if i >= int64(cells) {
		return cell, cells - 1
	}
	return v - i*cell, int(i)
}

// NavGrid is the walkable base grid: one bit per square cell, set when a character can
// stand there (not too steep, not water when water blocks, not under a static
// collider). Path finding and NPC placement start from it.
type NavGrid struct {
	// CellSize is the side of a cell in centimetres.
	CellSize int32
	// Cols and Rows count cells, covering the bounds (the last column and row may reach
	// past them).
	Cols, Rows int
	// Walkable holds one bit per cell, row by row from y = 0, least significant bit
	// first: cell i is bit i%8 of byte i/8.
	Walkable []byte
	// Ground holds, in the same layout, the cells whose terrain a body may stand on:
	// not steeper than maxWalkableSlope and not water when blockWater is set. Unlike
	// Walkable it ignores colliders, which movement tests exactly against their shapes;
	// the simulation (on the server and, through WebAssembly, in the browser) keeps
	// bodies on these cells.
	Ground []byte
}

// IsWalkable reports whether the cell at (col, row) is walkable; cells outside the grid
// are not.
func (n *NavGrid) IsWalkable(col, row int) bool {
	if col < 0 || row < 0 || col >= n.Cols || row >= n.Rows {
		return false
	}
	i := row*n.Cols + col
	return n.Walkable[i>>3]&(1<<(i&7)) != 0
}

// GroundAt reports whether the terrain of cell (col, row) can be stood on; cells
// outside the grid cannot.
func (n *NavGrid) GroundAt(col, row int) bool {
	if col < 0 || row < 0 || col >= n.Cols || row >= n.Rows {
		return false
	}
	i := row*n.Cols + col
	return n.Ground[i>>3]&(1<<(i&7)) != 0
}

// WalkableAt reports whether the point (x, y) in centimetres lies in a walkable cell.
func (n *NavGrid) WalkableAt(x, y int32) bool {
	if x < 0 || y < 0 {
		return false
	}
	return n.IsWalkable(int(x/n.CellSize), int(y/n.CellSize))
}

// PropKind describes one kind of prop a world may contain; the browser maps Name to a
// model.
type PropKind struct {
	// Name is the asset id, e.g. "oak".
	Name string
	// Set is the prop set the kind comes from, e.g. "temperate-trees".
	Set string
	// Shape is the collider shape of props of this kind.
	Shape PropShape
}

// Prop is one static, non-interactive prop.
type Prop struct {
	// ID is the static object id (see World for how ids are derived).
	ID uint64
	// Kind indexes World.PropKinds.
	Kind uint16
	// X, Y and Z locate the prop's base in centimetres; Z is the terrain height there.
	X, Y, Z int32
	// Yaw is the rotation around the vertical axis in 1/65536 of a turn.
	Yaw uint16
	// Scale is the size relative to the model in permille.
	Scale uint16
}

// Collider is one static collider. Circles have HalfX == HalfY == radius; boxes are
// axis-aligned with half extents HalfX and HalfY.
type Collider struct {
	// ID is the static object id of the collider.
	ID uint64
	// Owner is the id of the prop the collider belongs to, or 0 for boundary walls.
	Owner uint64
	// Shape is ShapeCircle or ShapeBox.
	Shape PropShape
	// X and Y are the centre in centimetres.
	X, Y int32
	// HalfX and HalfY are the half extents (radius for circles) in centimetres.
	HalfX, HalfY int32
}

// SpawnPoint is where a player can enter the map.
type SpawnPoint struct {
	// ID is the static object id.
	ID uint64
	// X, Y and Z locate the point in centimetres.
	X, Y, Z int32
}

// Portal is a circular trigger area that transfers a player to another map.
type Portal struct {
	// ID is the static object id.
	ID uint64
	// X, Y and Z locate the centre in centimetres.
	X, Y, Z int32
	// Radius is the trigger radius in centimetres.
	Radius int32
	// TargetMapID is the destination map.
	TargetMapID string
	// TargetSeed is non-zero for a portal to a discovered map: Derive(config,
	// TargetSeed) builds the destination config, whose MapID equals TargetMapID.
	TargetSeed uint64
}
