// Package defaultset is mapyard's default asset set, mapyard-default: original art
// drawn by this package's code (Generate), with no third-party file. The generated
// files are committed under set/ and embedded, so the edge serves them without a
// build step; `go generate ./mapserver/kernel/assets/defaultset` (mapserver/cmd/assetgen)
// draws them again after a change, and a test fails while they are stale.
package defaultset

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"

	"github.com/mapyard/mapyard/mapserver/kernel/assets"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
)

//go:generate go run ../../../cmd/assetgen -out set

//go:embed set
var embedded embed.FS

// Dir is the directory of the committed set inside this package.
const Dir = "set"

// Ref is the set's id and version: mapgen.DefaultAssetSet, which a MapConfig without
// assetSets uses.
var Ref = mapgen.DefaultAssetSet

// FS returns the committed set: manifest.json and its files at the root.
func FS() fs.FS {
	sub, err := fs.Sub(embedded, Dir)
	if err != nil {
		panic("defaultset: " + err.Error()) // a constant path: a build defect
	}
	return sub
}

// Generate draws the whole set: every file by path, manifest.json among them. The
// same code always draws the same bytes.
func Generate() (map[string][]byte, error) {
	out := map[string][]byte{}
	m := assets.Manifest{
		SchemaVersion: assets.SchemaVersion,
		ID:            Ref.ID,
		Version:       Ref.Version,
		Title:         "mapyard default",
		License:       "Original art drawn by mapyard's code (mapserver/kernel/assets/defaultset); same licence as mapyard.",
		Terrain:       map[string]assets.Tile{},
		Props:         map[string]assets.Prop{},
		Items:         map[string]assets.Sprite{},
		Characters:    map[string]assets.Character{},
		UI:            map[string]assets.Sprite{},
	}
	add := func(p string, c *canvas) string {
		out[p] = c.png()
		return p
	}
	for b := mapgen.Biome(0); b.String() != "unknown"; b++ {
		name := b.String()
		m.Terrain[name] = assets.Tile{File: add("terrain/"+name+".png", terrainTile(name)), Metres: tileMetres}
	}
	for _, kind := range mapgen.PropKindNames() {
		a, ok := props[kind]
		if !ok {
			a = propFallback
		}
		c := newCanvas(a.w, a.h, "props/"+kind)
		a.draw(c)
		c.shadeBelow(780)
		c.outline()
		m.Props[kind] = assets.Prop{
			Sprite:    assets.Sprite{File: add("props/"+kind+".png", c), Anchor: [2]int{a.ax, a.ay}, PixelsPerMetre: a.ppm},
			Footprint: a.footprint,
		}
	}
	for _, id := range items.DefaultCatalog().IDs() {
		m.Items[id] = assets.Sprite{File: add("items/"+id+".png", itemIcon(id)), Anchor: [2]int{iconSize / 2, iconSize / 2}, PixelsPerMetre: 32}
	}
	for _, kind := range slices.Sorted(func(yield func(string) bool) {
		for k := range looks {
			if !yield(k) {
				return
			}
		}
	}) {
		anims := map[string]assets.Animation{}
		for row, dir := range directions {
			stand := row * 3
			anims["idle-"+dir] = assets.Animation{Frames: []int{stand}, FPS: 1}
			anims["walk-"+dir] = assets.Animation{Frames: []int{stand + 1, stand, stand + 2, stand}, FPS: 8}
		}
		anims["idle"] = anims["idle-south"]
		m.Characters[kind] = assets.Character{
			Sprite:     assets.Sprite{File: add("characters/"+kind+".png", characterSheet(kind)), Anchor: [2]int{frameW / 2, frameH - 1}, PixelsPerMetre: 16},
			Frame:      [2]int{frameW, frameH},
			Animations: anims,
		}
	}
	m.Portal = &assets.Sprite{File: add("portal.png", portalArt()), Anchor: [2]int{16, 37}, PixelsPerMetre: 8}
	m.UI["placeholder"] = assets.Sprite{File: add("ui/placeholder.png", placeholderArt()), Anchor: [2]int{8, 8}, PixelsPerMetre: 16}

	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for k := range out {
			if !yield(k) {
				return
			}
		}
	}) {
		sum := sha256.Sum256(out[p])
		m.Files = append(m.Files, assets.File{Path: p, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(out[p]))})
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("default asset set: %w", err)
	}
	raw, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return nil, err
	}
	out[assets.ManifestName] = append(raw, '\n')
	return out, nil
}
