package mapgen

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// templates holds the pre-authored configs of known maps, one <mapId>.json each.
//
//go:embed maps/*.json
var templates embed.FS

// Templates is a set of map templates: the kit's own, embedded, with a host's laid
// over them (LoadTemplates), so that a host adds maps of its own, or replaces one of
// the kit's (default.json changes the default map), without editing the kit. A nil
// *Templates is the kit's own alone; the package's functions (Template, Resolve,
// StartConfig, Complete) are its methods.
type Templates struct {
	host map[string][]byte // a host's configs by map id, each checked by LoadTemplates
}

// LoadTemplates reads a host's templates from dir: every <mapId>.json in it is a
// whole MapConfig of map mapId (other files are left alone), whose instanceId may be
// left out (InstanceOfMap: every instance is named when it is created). Each must parse
// and validate and name its own map id; the first that does not is the error, naming
// the file and the field.
func LoadTemplates(dir string) (*Templates, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("map templates: %w", err)
	}
	t := &Templates{host: map[string][]byte{}}
	for _, e := range entries {
		name := e.Name()
		id, ok := strings.CutSuffix(name, ".json")
		if !ok || e.IsDir() {
			continue
		}
		path := filepath.Join(dir, name)
		if err := ValidateID("mapId", id); err != nil {
			return nil, fmt.Errorf("map template %s: the file's name is the map id: %w", path, err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("map template: %w", err)
		}
		if data, err = withInstanceID(data, id); err != nil {
			return nil, fmt.Errorf("map template %s: %w", path, err)
		}
		c, err := Parse(data)
		if err != nil {
			return nil, fmt.Errorf("map template %s: %w", path, err)
		}
		if c.MapID != id {
			return nil, fmt.Errorf("map template %s: declares mapId %q; a template's file is named for its map", path, c.MapID)
		}
		t.host[id] = data
	}
	return t, nil
}

// withInstanceID returns data, a template's JSON object, with instanceId set to
// InstanceOfMap(mapID) when it has none; numbers are kept as written.
func withInstanceID(data []byte, mapID string) ([]byte, error) {
	var doc map[string]any
	if err := decodeNumbers(data, &doc); err != nil {
		return nil, fmt.Errorf("must be a JSON object: %w", err)
	}
	if _, ok := doc["instanceId"]; ok {
		return data, nil
	}
	doc["instanceId"] = InstanceOfMap(mapID)
	return json.Marshal(doc)
}

// Host returns the ids of the host's own templates, sorted.
func (t *Templates) Host() []string {
	if t == nil {
		return nil
	}
	ids := make([]string, 0, len(t.host))
	for id := range t.host {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// TemplateIDs returns the ids of the maps with a pre-authored config of the kit's, sorted.
func TemplateIDs() []string {
	entries, err := templates.ReadDir("maps")
	if err != nil {
		return nil // cannot happen: the directory is embedded
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(ids)
	return ids
}

// Template returns the kit's pre-authored config of mapID (see Templates.Template).
func Template(mapID string) (MapConfig, error) { return (*Templates)(nil).Template(mapID) }

// Template returns the config of mapID, the host's template when it has one, else the
// kit's, parsed and validated. Each call returns a fresh copy the caller may change (for
// example its InstanceID or Seed). An id without a template yields an error wrapping
// ErrUnknownMap.
func (t *Templates) Template(mapID string) (MapConfig, error) {
	if err := ValidateID("mapId", mapID); err != nil {
		return MapConfig{}, err
	}
	data, ok := []byte(nil), false
	if t != nil {
		data, ok = t.host[mapID]
	}
	if !ok {
		var err error
		if data, err = templates.ReadFile("maps/" + mapID + ".json"); err != nil {
			return MapConfig{}, fmt.Errorf("template %q: %w", mapID, ErrUnknownMap)
		}
	}
	c, err := Parse(data)
	if err != nil {
		return MapConfig{}, fmt.Errorf("template %q: %w", mapID, err)
	}
	if c.MapID != mapID {
		return MapConfig{}, fmt.Errorf("template %q: file declares mapId %q", mapID, c.MapID)
	}
	return c, nil
}

// Default returns the pre-authored config of the default map (DefaultMapID, instance
// DefaultInstanceID). The embedded file is checked by the package's tests, so a failure
// here is a build defect and panics.
func Default() MapConfig {
	c, err := Template(DefaultMapID)
	if err != nil {
		panic(fmt.Sprintf("mapgen: embedded default map config is broken: %v", err))
	}
	return c
}

// DerivedMapID returns the id of the map discovered from parentMapID with seed: "wild-"
// and 12 hex digits of a SHA-256 over both. A portal with Discover carries this id as
// its TargetMapID, and Derive gives the config the same id.
func DerivedMapID(parentMapID string, seed uint64) string {
	sum := sha256.Sum256([]byte("mapyard/derive\x00" + parentMapID + "\x00" + strconv.FormatUint(seed, 10)))
	return "wild-" + hex.EncodeToString(sum[:6])
}

// Derive builds the config of a newly discovered map from its parent's config and a
// seed (usually a Portal.TargetSeed of the parent's world). The same inputs always give
// the same config: it keeps the parent's bounds, prop sets, asset sets and collider rules, varies
// terrain and biome parameters within valid ranges, and has one portal back to the
// parent and one to a further discovered map. Its instance id is InstanceOfMap of its map id.
func Derive(parent MapConfig, seed uint64) (MapConfig, error) {
	if err := parent.Validate(); err != nil {
		return MapConfig{}, fmt.Errorf("derive from %q: parent: %w", parent.MapID, err)
	}
	if seed > MaxSeed {
		return MapConfig{}, invalid("seed", "must be at most %d so JavaScript numbers hold it exactly (got %d)", uint64(MaxSeed), seed)
	}
	c := parent.Clone()
	c.MapID = DerivedMapID(parent.MapID, seed)
	c.InstanceID = InstanceOfMap(c.MapID)
	c.Seed = seed

	r := newRNG(seed, streamDerive)
	vary := func(v, lo, hi, permilleSpread int) int {
		v = v * (1000 + r.between(-permilleSpread, permilleSpread)) / 1000
		return min(max(v, lo), hi)
	}
	t := &c.Terrain
	t.MaxHeight = vary(t.MaxHeight, 0, maxTerrainHeight, 300)
	t.FeatureSize = vary(t.FeatureSize, 10, maxFeatureSize, 300)
	t.Persistence = vary(t.Persistence, 0, 1000, 200)
	t.WaterLevel = min(max(t.WaterLevel+r.between(-150, 150), 0), 1000)
	b := &c.Biome
	b.MoistureBias = min(max(b.MoistureBias+r.between(-250, 250), -1000), 1000)
	c.GenerationRules.Portals = []PortalRule{
		{TargetMapID: parent.MapID, Count: 1},
		{Discover: true, Count: 1},
	}
	if err := c.Validate(); err != nil {
		return MapConfig{}, fmt.Errorf("derive from %q: %w", parent.MapID, err)
	}
	return c, nil
}

// Resolve returns the MapConfig an instance runs: raw parsed and validated when given
// (it must name the same instance and map), otherwise (absent or JSON null) the template of mapID with the
// instance id set. The orchestrator checks admin input with it and the map server loads
// its config with it, so both refuse the same configs for the same reasons.
func Resolve(instanceID, mapID string, raw []byte) (MapConfig, error) {
	return (*Templates)(nil).Resolve(instanceID, mapID, raw)
}

// Resolve is the package's Resolve over t's templates.
func (t *Templates) Resolve(instanceID, mapID string, raw []byte) (MapConfig, error) {
	if trimmed := bytes.TrimSpace(raw); len(trimmed) == 0 || string(trimmed) == "null" {
		c, err := t.Template(mapID)
		if err != nil {
			return MapConfig{}, err
		}
		c.InstanceID = instanceID
		if err := c.Validate(); err != nil {
			return MapConfig{}, err
		}
		return c, nil
	}
	c, err := Parse(raw)
	if err != nil {
		return MapConfig{}, err
	}
	if c.InstanceID != instanceID || c.MapID != mapID {
		return MapConfig{}, fmt.Errorf("config names instance %q of map %q, not %q of %q", c.InstanceID, c.MapID, instanceID, mapID)
	}
	return c, nil
}

// StartConfig returns the MapConfig, as JSON, that /control/start-instance hands the
// map running instanceID: raw as it is when the instance was created with a config of
// its own, else the template of mapID completed for that instance (Resolve). The
// orchestrator and the fake orchestrator build every start-instance with it, the default
// map's included, so that a map always receives its whole config and never needs a copy
// of mapyard's templates (a map written in another language has none). A map id
// without a template and no config yields an error wrapping ErrUnknownMap.
func StartConfig(instanceID, mapID string, raw []byte) (json.RawMessage, error) {
	return (*Templates)(nil).StartConfig(instanceID, mapID, raw)
}

// StartConfig is the package's StartConfig over t's templates.
func (t *Templates) StartConfig(instanceID, mapID string, raw []byte) (json.RawMessage, error) {
	if trimmed := bytes.TrimSpace(raw); len(trimmed) > 0 && string(trimmed) != "null" {
		return json.RawMessage(raw), nil
	}
	c, err := t.Resolve(instanceID, mapID, nil)
	if err != nil {
		return nil, fmt.Errorf("config of instance %q: %w", instanceID, err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode config of instance %q: %w", instanceID, err)
	}
	return b, nil
}

// Complete returns the full MapConfig of a partial one, such as the admin API's
// `{"seed":7}`: partial (a JSON object holding any subset of MapConfig's fields) is laid
// over the template of mapID — or, for a map id without a template, over the default
// map's template renamed to mapID — as a JSON merge patch (RFC 7386: objects merge
// field by field, any other value replaces, null removes). instanceId and mapId come
// from the arguments unless partial names them (then they must agree, as in Resolve).
// The result is validated like any config. A complete config is returned as Parse would.
func Complete(instanceID, mapID string, partial []byte) (MapConfig, error) {
	return (*Templates)(nil).Complete(instanceID, mapID, partial)
}

// Complete is the package's Complete over t's templates (a map without one is laid over
// t's default map).
func (t *Templates) Complete(instanceID, mapID string, partial []byte) (MapConfig, error) {
	if trimmed := bytes.TrimSpace(partial); len(trimmed) == 0 || string(trimmed) == "null" {
		return t.Resolve(instanceID, mapID, partial)
	}
	var patch map[string]any
	if err := decodeNumbers(partial, &patch); err != nil {
		return MapConfig{}, fmt.Errorf("decode map config: must be a JSON object: %w", err)
	}
	base, err := t.Template(mapID)
	if errors.Is(err, ErrUnknownMap) {
		base, err = t.Template(DefaultMapID)
	}
	if err != nil {
		return MapConfig{}, err
	}
	base.MapID, base.InstanceID = mapID, instanceID
	raw, err := json.Marshal(base)
	if err != nil {
		return MapConfig{}, fmt.Errorf("encode template of %q: %w", mapID, err)
	}
	var doc map[string]any
	if err := decodeNumbers(raw, &doc); err != nil {
		return MapConfig{}, fmt.Errorf("decode template of %q: %w", mapID, err)
	}
	merged, err := json.Marshal(mergePatch(doc, patch))
	if err != nil {
		return MapConfig{}, fmt.Errorf("encode map config: %w", err)
	}
	return t.Resolve(instanceID, mapID, merged)
}

// mergePatch applies patch to doc as RFC 7386 says and returns doc.
func mergePatch(doc, patch map[string]any) map[string]any {
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(doc, k)
		case map[string]any:
			dv, ok := doc[k].(map[string]any)
			if !ok {
				dv = map[string]any{}
			}
			doc[k] = mergePatch(dv, pv)
		default:
			doc[k] = v
		}
	}
	return doc
}

// decodeNumbers decodes a JSON object keeping numbers as written, so no seed or
// length passes through a float64.
func decodeNumbers(data []byte, v *map[string]any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if *v == nil {
		return errors.New("not an object")
	}
	return nil
}
