package mapgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Limits that keep any valid config cheap to generate (well under a second and a few
// megabytes), so that a config from a data file, the orchestrator or a fuzzer can never
// stall a map server or a browser tab.
const (
	MinMapSize          = 100   // metres, per side
	MaxMapSize          = 8000  // metres, per side
	MaxTerrainCells     = 512   // heightfield cells per side
	MaxNavCells         = 1024  // navigation cells per side
	MaxPropAttempts     = 50000 // prop placement attempts per map
	MaxDynamicPerMap    = 20000 // NPCs or interactables per map
	MaxSpawnPoints      = 64
	MaxPortalRules      = 16
	MaxPortalsPerRule   = 8
	MaxPortals          = 32
	MaxPropSets         = 8
	MaxAssetSets        = 4
	MaxAssetVersionLen  = 32
	MaxIDLength         = 48
	maxTerrainHeight    = 500 // metres; heights are uint16 centimetres
	maxFeatureSize      = 20000
	maxOctaves          = 8
	maxNavCellSize      = 50
	maxTerrainCellSize  = 100
	maxWallThickness    = 50
	maxBeachHeight      = 100
	maxWalkableSlope    = 10000
	maxPerKm2           = 5000
	maxConfigJSONLength = 64 << 10
)

// ValidationError reports one bad value in a MapConfig. Field is the JSON path of the
// value (for example "bounds.width" or "generationRules.portals[1].count") so a user
// can find it in a data file; the orchestrator maps it to the bad_request code.
type ValidationError struct {
	Field   string
	Message string
}

// Error implements the error interface as "field: message".
func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// ErrUnknownMap is returned (wrapped) by Template for a map id without a pre-authored
// config.
var ErrUnknownMap = errors.New("unknown map")

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

func checkRange(field string, v, lo, hi int) error {
	if v < lo || v > hi {
		return invalid(field, "must be between %d and %d (got %d)", lo, hi, v)
	}
	return nil
}

// IDRule says in words what ValidateID and ValidID accept, for error messages.
const IDRule = "1 to 48 characters of a-z, 0-9 and '-', not starting or ending with '-'"

// ValidID reports whether id is a valid map or instance id (IDRule). It is the one
// id rule of mapyard: the orchestrator's control contract uses it too.
func ValidID(id string) bool { return ValidateID("id", id) == nil }

// ValidateID reports whether id is a valid map or instance id: 1 to 48 characters of
// lowercase letters, digits and '-', not starting or ending with '-'. Such ids are safe
// inside Docker container names, URLs and file names.
func ValidateID(field, id string) error {
	if id == "" {
		return invalid(field, "must not be empty")
	}
	if len(id) > MaxIDLength {
		return invalid(field, "must be at most %d characters (got %d)", MaxIDLength, len(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return invalid(field, "must contain only a-z, 0-9 and '-' (got %q)", id)
		}
	}
	if id[0] == '-' || id[len(id)-1] == '-' {
		return invalid(field, "must not start or end with '-' (got %q)", id)
	}
	return nil
}

// MaxImageLength bounds an image reference, as Docker bounds a repository name.
const MaxImageLength = 255

// ValidateImage reports whether ref looks like a container image reference
// ([registry/]name[:tag][@digest]): at most MaxImageLength characters of a-z, A-Z,
// 0-9 and ./:@_-, starting and ending with a letter or digit. It checks the form only:
// which images a host runs is the host's decision (ORCH_MAP_IMAGES), and whether one
// exists is the engine's. An empty ref is valid when optional (it means the host's
// default image).
func ValidateImage(field, ref string, optional bool) error {
	if ref == "" {
		if optional {
			return nil
		}
		return invalid(field, "must not be empty")
	}
	if len(ref) > MaxImageLength {
		return invalid(field, "must be at most %d characters (got %d)", MaxImageLength, len(ref))
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	for i := 0; i < len(ref); i++ {
		if c := ref[i]; !alnum(c) && !strings.ContainsRune("./:@_-", rune(c)) {
			return invalid(field, "must be an image reference such as mapyard/map:latest (got %q)", ref)
		}
	}
	if !alnum(ref[0]) || !alnum(ref[len(ref)-1]) {
		return invalid(field, "must start and end with a letter or digit (got %q)", ref)
	}
	return nil
}

// Validate checks every field of c and returns a *ValidationError naming the first bad
// value, or nil. A valid config always generates, quickly, without error.
func (c *MapConfig) Validate() error {
	if c.SchemaVersion != SchemaVersion {
		return invalid("schemaVersion", "unsupported version %d (this build reads %d)", c.SchemaVersion, SchemaVersion)
	}
	if err := ValidateID("mapId", c.MapID); err != nil {
		return err
	}
	if err := ValidateID("instanceId", c.InstanceID); err != nil {
		return err
	}
	if c.Seed > MaxSeed {
		return invalid("seed", "must be at most %d so JavaScript numbers hold it exactly (got %d)", uint64(MaxSeed), c.Seed)
	}
	if err := checkRange("bounds.width", c.Bounds.Width, MinMapSize, MaxMapSize); err != nil {
		return err
	}
	if err := checkRange("bounds.height", c.Bounds.Height, MinMapSize, MaxMapSize); err != nil {
		return err
	}
	if err := ValidateImage("image", c.Image, true); err != nil {
		return err
	}
	for _, check := range []func() error{c.validateTerrain, c.validateBiome, c.validatePropSets, c.validateColliders, c.validateRules, c.validateAssetSets} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// cellsAlong returns how many cells of size cell cover length (rounding up).
func cellsAlong(length, cell int) int { return (length + cell - 1) / cell }

// checkGrid checks that cells of the given size cover the bounds with at most limit
// cells per side.
func (c *MapConfig) checkGrid(field string, cell, lo, hi, limit int) error {
	if err := checkRange(field, cell, lo, hi); err != nil {
		return err
	}
	side := max(c.Bounds.Width, c.Bounds.Height)
	if n := cellsAlong(side, cell); n > limit {
		return invalid(field, "gives %d cells along a %d m side, more than %d (use at least %d)", n, side, limit, cellsAlong(side, limit))
	}
	return nil
}

func (c *MapConfig) validateTerrain() error {
	t := &c.Terrain
	if err := c.checkGrid("terrain.cellSize", t.CellSize, 1, maxTerrainCellSize, MaxTerrainCells); err != nil {
		return err
	}
	checks := []struct {
		field     string
		v, lo, hi int
	}{
		{"terrain.maxHeight", t.MaxHeight, 0, maxTerrainHeight},
		{"terrain.featureSize", t.FeatureSize, 10, maxFeatureSize},
		{"terrain.octaves", t.Octaves, 1, maxOctaves},
		{"terrain.persistence", t.Persistence, 0, 1000},
		{"terrain.waterLevel", t.WaterLevel, 0, 1000},
	}
	for _, k := range checks {
		if err := checkRange(k.field, k.v, k.lo, k.hi); err != nil {
			return err
		}
	}
	return nil
}

func (c *MapConfig) validateBiome() error {
	b := &c.Biome
	checks := []struct {
		field     string
		v, lo, hi int
	}{
		{"biome.moistureScale", b.MoistureScale, 10, maxFeatureSize},
		{"biome.moistureBias", b.MoistureBias, -1000, 1000},
		{"biome.beachHeight", b.BeachHeight, 0, maxBeachHeight},
		{"biome.rockLine", b.RockLine, 0, 1000},
		{"biome.snowLine", b.SnowLine, b.RockLine, 1000},
		{"biome.dryBelow", b.DryBelow, 0, 1000},
		{"biome.wetAbove", b.WetAbove, b.DryBelow, 1000},
	}
	for _, k := range checks {
		if err := checkRange(k.field, k.v, k.lo, k.hi); err != nil {
			return err
		}
	}
	return nil
}

func (c *MapConfig) validatePropSets() error {
	if len(c.PropSetIDs) > MaxPropSets {
		return invalid("propSetIds", "must list at most %d prop sets (got %d)", MaxPropSets, len(c.PropSetIDs))
	}
	for i, id := range c.PropSetIDs {
		field := fmt.Sprintf("propSetIds[%d]", i)
		if findPropSet(id) < 0 {
			return invalid(field, "unknown prop set %q (known: %s)", id, strings.Join(PropSetIDs(), ", "))
		}
		for _, prev := range c.PropSetIDs[:i] {
			if prev == id {
				return invalid(field, "duplicate prop set %q", id)
			}
		}
	}
	return nil
}

// ValidateAssetVersion reports whether v is a valid asset set version: 1 to 32
// characters of a-z, 0-9, '.' and '-', starting and ending with a letter or digit
// ("1", "2.3", "2026-11").
func ValidateAssetVersion(field, v string) error {
	if v == "" || len(v) > MaxAssetVersionLen {
		return invalid(field, "must be 1 to %d characters (got %d)", MaxAssetVersionLen, len(v))
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	for i := 0; i < len(v); i++ {
		if c := v[i]; !alnum(c) && c != '.' && c != '-' {
			return invalid(field, "must contain only a-z, 0-9, '.' and '-' (got %q)", v)
		}
	}
	if !alnum(v[0]) || !alnum(v[len(v)-1]) {
		return invalid(field, "must start and end with a letter or digit (got %q)", v)
	}
	return nil
}

func (c *MapConfig) validateAssetSets() error {
	if len(c.AssetSets) > MaxAssetSets {
		return invalid("assetSets", "must list at most %d asset sets (got %d)", MaxAssetSets, len(c.AssetSets))
	}
	for i, r := range c.AssetSets {
		field := fmt.Sprintf("assetSets[%d]", i)
		if err := ValidateID(field+".id", r.ID); err != nil {
			return err
		}
		if err := ValidateAssetVersion(field+".version", r.Version); err != nil {
			return err
		}
		for _, prev := range c.AssetSets[:i] {
			if prev.ID == r.ID {
				return invalid(field+".id", "duplicate asset set %q", r.ID)
			}
		}
	}
	return nil
}

func (c *MapConfig) validateColliders() error {
	s := &c.StaticCollider
	if err := c.checkGrid("staticCollider.navCellSize", s.NavCellSize, 1, maxNavCellSize, MaxNavCells); err != nil {
		return err
	}
	if err := checkRange("staticCollider.maxWalkableSlope", s.MaxWalkableSlope, 0, maxWalkableSlope); err != nil {
		return err
	}
	lo := 0
	if s.BoundaryWalls {
		lo = 1
	}
	return checkRange("staticCollider.wallThickness", s.WallThickness, lo, maxWallThickness)
}

// areaM2 is the map area in square metres.
func (c *MapConfig) areaM2() int { return c.Bounds.Width * c.Bounds.Height }

// perMap converts a per-km² density into a count over the whole map (rounded down).
func (c *MapConfig) perMap(density int) int { return density * c.areaM2() / 1_000_000 }

func (c *MapConfig) validateRules() error {
	g := &c.GenerationRules
	densities := []struct {
		field string
		v     int
		limit int
	}{
		{"generationRules.propDensity", g.PropDensity, MaxPropAttempts},
		{"generationRules.npcDensity", g.NPCDensity, MaxDynamicPerMap},
		{"generationRules.interactableDensity", g.InteractableDensity, MaxDynamicPerMap},
	}
	for _, d := range densities {
		if err := checkRange(d.field, d.v, 0, maxPerKm2); err != nil {
			return err
		}
		if n := c.perMap(d.v); n > d.limit {
			return invalid(d.field, "gives %d per map over %d m x %d m, more than %d", n, c.Bounds.Width, c.Bounds.Height, d.limit)
		}
	}
	if err := checkRange("generationRules.spawnPoints", g.SpawnPoints, 1, MaxSpawnPoints); err != nil {
		return err
	}
	if len(g.Portals) > MaxPortalRules {
		return invalid("generationRules.portals", "must list at most %d rules (got %d)", MaxPortalRules, len(g.Portals))
	}
	total := 0
	for i, p := range g.Portals {
		field := fmt.Sprintf("generationRules.portals[%d]", i)
		if err := checkRange(field+".count", p.Count, 1, MaxPortalsPerRule); err != nil {
			return err
		}
		total += p.Count
		switch {
		case p.Discover && p.TargetMapID != "":
			return invalid(field+".targetMapId", "must be empty when discover is set (got %q)", p.TargetMapID)
		case p.Discover:
		case p.TargetMapID == c.MapID:
			return invalid(field+".targetMapId", "must differ from mapId %q", c.MapID)
		default:
			if err := ValidateID(field+".targetMapId", p.TargetMapID); err != nil {
				return err
			}
		}
	}
	if total > MaxPortals {
		return invalid("generationRules.portals", "place %d portals in all, more than %d", total, MaxPortals)
	}
	return nil
}

// Parse decodes a MapConfig from JSON, migrates an older schemaVersion when a migration
// exists, and validates it. Unknown fields and data after the object are errors, so a typo in a
// data file is reported instead of silently ignored. Errors about values are
// *ValidationError.
func Parse(data []byte) (MapConfig, error) {
	if len(data) > maxConfigJSONLength {
		return MapConfig{}, invalid("", "map config is %d bytes, more than %d", len(data), maxConfigJSONLength)
	}
	// Unmarshal (unlike a Decoder) also rejects anything after the object.
	var head struct {
		SchemaVersion *int `json:"schemaVersion"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return MapConfig{}, fmt.Errorf("decode map config: %w", err)
	}
	switch {
	case head.SchemaVersion == nil:
		return MapConfig{}, invalid("schemaVersion", "missing (this build reads %d)", SchemaVersion)
	case *head.SchemaVersion > SchemaVersion:
		return MapConfig{}, invalid("schemaVersion", "version %d is newer than this build supports (%d)", *head.SchemaVersion, SchemaVersion)
	case *head.SchemaVersion < SchemaVersion:
		// Version 1 is the first schema: there is nothing older to migrate from. When
		// version 2 arrives, its migration from 1 rewrites the raw JSON here.
		return MapConfig{}, invalid("schemaVersion", "version %d is no longer supported and has no migration (this build reads %d)", *head.SchemaVersion, SchemaVersion)
	}

	var c MapConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return MapConfig{}, fmt.Errorf("decode map config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return MapConfig{}, err
	}
	return c, nil
}
