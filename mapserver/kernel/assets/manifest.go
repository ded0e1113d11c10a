// Package assets defines asset sets: the art a page draws a map's world with, named by
// id and version in MapConfig.AssetSets and described by a versioned manifest
// (manifest.json, schema docs/schemas/common/asset-manifest.json) that lists every file
// with its size and SHA-256, the terrain tile of each biome, the sprite of each prop
// kind the generator places, the icon of each item template, the animated sprites of
// characters and NPCs, and the portal and UI art.
//
// Load reads and verifies a set directory: the edge serves only sets that pass, and
// every refusal says why with a stable Reason (a metric label) and the file concerned.
// The package imports only standard packages and the kernel, so it builds for
// GOOS=js GOARCH=wasm like the generator whose prop ids it names.
package assets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
)

// SchemaVersion is the manifest format this build reads.
const SchemaVersion = 1

// ManifestName is the manifest's file name at the root of a set directory.
const ManifestName = "manifest.json"

// Limits of one set. A sprite larger than MaxFileSize is refused (a 50 MB "sprite" is
// a mistake or an attack on every player's first load), and so is a set larger than
// MaxSetSize in all.
const (
	MaxFileSize     = 2 << 20
	MaxSetSize      = 16 << 20
	MaxFiles        = 1024
	MaxManifestSize = 256 << 10
	MaxPathLength   = 128
	MaxVersionLen   = 32
)

// Reasons a set is refused: stable codes for logs and the label of the edge's
// mapyard_edge_asset_sets_refused_total metric.
const (
	ReasonManifestMissing = "manifest_missing"
	ReasonManifestInvalid = "manifest_invalid"
	ReasonBadPath         = "bad_path"
	ReasonFileMissing     = "file_missing"
	ReasonFileTooLarge    = "file_too_large"
	ReasonSizeMismatch    = "size_mismatch"
	ReasonHashMismatch    = "hash_mismatch"
	ReasonSetTooLarge     = "set_too_large"
)

// Error is why a set was refused: Reason is one of the Reason constants, Path the file
// (or manifest field) concerned, Message the detail a host reads.
type Error struct {
	Reason  string
	Path    string
	Message string
}

// Error implements error as "reason: path: message".
func (e *Error) Error() string {
	if e.Path == "" {
		return e.Reason + ": " + e.Message
	}
	return e.Reason + ": " + e.Path + ": " + e.Message
}

func refuse(reason, p, format string, args ...any) *Error {
	return &Error{Reason: reason, Path: p, Message: fmt.Sprintf(format, args...)}
}

// Ref names one asset set, as MapConfig.AssetSets lists it.
type Ref = mapgen.AssetSetRef

// Manifest describes one asset set. Every path it names is relative to the set
// directory and listed in Files.
type Manifest struct {
	// SchemaVersion must equal SchemaVersion.
	SchemaVersion int `json:"schemaVersion"`
	// ID names the set (the map id rule, mapgen.ValidID), e.g. "mapyard-default".
	ID string `json:"id"`
	// Version tells releases of one set apart (mapgen.ValidateAssetVersion), e.g. "1".
	Version string `json:"version"`
	// Title is a human name for the set.
	Title string `json:"title,omitempty"`
	// License says under which terms the art may be used.
	License string `json:"license,omitempty"`
	// Files lists every file of the set with its size and hash.
	Files []File `json:"files"`
	// Terrain maps a biome name (mapgen.Biome.String, e.g. "grassland") to its tile.
	Terrain map[string]Tile `json:"terrain,omitempty"`
	// Props maps a prop kind name of the generator's catalog (e.g. "oak") to its sprite.
	Props map[string]Prop `json:"props,omitempty"`
	// Items maps an item template id (e.g. "coin") to its icon.
	Items map[string]Sprite `json:"items,omitempty"`
	// Characters maps a character kind ("player", "npc", ...) to its animated sprite.
	Characters map[string]Character `json:"characters,omitempty"`
	// Portal is the portal's sprite.
	Portal *Sprite `json:"portal,omitempty"`
	// UI maps a UI element name (e.g. "placeholder") to its image.
	UI map[string]Sprite `json:"ui,omitempty"`
}

// File is one file of a set.
type File struct {
	// Path is relative to the set directory: '/'-separated, no "..", not absolute.
	Path string `json:"path"`
	// SHA256 is the file's SHA-256 as 64 lowercase hex digits.
	SHA256 string `json:"sha256"`
	// Size is the file's length in bytes, at most MaxFileSize.
	Size int64 `json:"size"`
}

// Sprite is an image drawn at a point of the world.
type Sprite struct {
	// File is the image's path among Files.
	File string `json:"file"`
	// Anchor is the pixel of the image (from its top left) that stands on the point.
	Anchor [2]int `json:"anchor"`
	// PixelsPerMetre is the image's scale in the world.
	PixelsPerMetre int `json:"pixelsPerMetre"`
}

// Tile is a terrain texture repeated over a biome's cells.
type Tile struct {
	// File is the image's path among Files.
	File string `json:"file"`
	// Metres is the side of the square the image covers in the world.
	Metres int `json:"metres"`
}

// Prop is the sprite of a prop kind and the ground it covers.
type Prop struct {
	Sprite
	// Footprint is the width and depth in centimetres of the ground the prop covers at
	// scale 1000, for depth ordering and picking; the collider is the generator's.
	Footprint [2]int `json:"footprint"`
}

// Character is a sprite sheet of frames of equal size and the animations drawn from it.
type Character struct {
	Sprite
	// Frame is a frame's width and height in pixels; frames are laid out left to right,
	// row by row, numbered from 0.
	Frame [2]int `json:"frame"`
	// Animations maps an animation name (RequiredAnimations at least) to its frames.
	Animations map[string]Animation `json:"animations"`
}

// Animation is a loop of frames of a character's sheet.
type Animation struct {
	// Frames are frame numbers of the sheet, in order.
	Frames []int `json:"frames"`
	// FPS is how many frames a second the loop shows.
	FPS int `json:"fps"`
}

// RequiredAnimations are the animations every character must have: standing, and
// walking in each of four directions (north is up the screen).
var RequiredAnimations = []string{"idle", "walk-north", "walk-east", "walk-south", "walk-west"}

// Parse decodes a manifest and checks it on its own (Validate), without reading the
// files it lists. Unknown fields are refused, so a typo is reported, not ignored.
func Parse(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestSize {
		return nil, refuse(ReasonManifestInvalid, ManifestName, "is %d bytes, more than %d", len(data), MaxManifestSize)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, refuse(ReasonManifestInvalid, ManifestName, "does not parse: %v", err)
	}
	if dec.More() {
		return nil, refuse(ReasonManifestInvalid, ManifestName, "has data after the object")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Ref returns the set's id and version.
func (m *Manifest) Ref() Ref { return Ref{ID: m.ID, Version: m.Version} }

// File returns the listed file at path p.
func (m *Manifest) File(p string) (File, bool) {
	for _, f := range m.Files {
		if f.Path == p {
			return f, true
		}
	}
	return File{}, false
}

// Validate checks the manifest on its own: version, id, every path's form, sizes
// within limits, hashes' form, and that every sprite names a listed file.
func (m *Manifest) Validate() error {
	bad := func(field, format string, args ...any) error {
		return refuse(ReasonManifestInvalid, field, format, args...)
	}
	if m.SchemaVersion != SchemaVersion {
		return bad("schemaVersion", "unsupported version %d (this build reads %d)", m.SchemaVersion, SchemaVersion)
	}
	if err := mapgen.ValidateID("id", m.ID); err != nil {
		return bad("id", "%v", err)
	}
	if err := mapgen.ValidateAssetVersion("version", m.Version); err != nil {
		return bad("version", "%v", err)
	}
	if len(m.Files) == 0 || len(m.Files) > MaxFiles {
		return bad("files", "must list 1 to %d files (got %d)", MaxFiles, len(m.Files))
	}
	seen := make(map[string]bool, len(m.Files))
	var total int64
	for _, f := range m.Files {
		if err := CheckPath(f.Path); err != nil {
			return err
		}
		if seen[f.Path] {
			return bad(f.Path, "listed twice")
		}
		seen[f.Path] = true
		if f.Size < 0 {
			return bad(f.Path, "negative size %d", f.Size)
		}
		if f.Size > MaxFileSize {
			return refuse(ReasonFileTooLarge, f.Path, "is %d bytes, more than the %d a file may have", f.Size, MaxFileSize)
		}
		if total += f.Size; total > MaxSetSize {
			return refuse(ReasonSetTooLarge, f.Path, "the set passes %d bytes here, more than %d", total, MaxSetSize)
		}
		if !validHash(f.SHA256) {
			return bad(f.Path, "sha256 must be 64 lowercase hex digits (got %q)", f.SHA256)
		}
	}
	listed := func(field, p string) error {
		if !seen[p] {
			return bad(field, "names %q, which files does not list", p)
		}
		return nil
	}
	sprite := func(field string, s Sprite) error {
		if s.PixelsPerMetre < 1 || s.PixelsPerMetre > 1024 {
			return bad(field+".pixelsPerMetre", "must be between 1 and 1024 (got %d)", s.PixelsPerMetre)
		}
		return listed(field+".file", s.File)
	}
	for _, name := range sortedKeys(m.Terrain) {
		t := m.Terrain[name]
		if !knownBiome(name) {
			return bad("terrain."+name, "unknown biome (known: %s)", strings.Join(biomeNames(), ", "))
		}
		if t.Metres < 1 || t.Metres > 1000 {
			return bad("terrain."+name+".metres", "must be between 1 and 1000 (got %d)", t.Metres)
		}
		if err := listed("terrain."+name+".file", t.File); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(m.Props) {
		p := m.Props[name]
		if err := sprite("props."+name, p.Sprite); err != nil {
			return err
		}
		if p.Footprint[0] < 0 || p.Footprint[1] < 0 {
			return bad("props."+name+".footprint", "must not be negative")
		}
	}
	for _, name := range sortedKeys(m.Items) {
		if err := sprite("items."+name, m.Items[name]); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(m.Characters) {
		c := m.Characters[name]
		field := "characters." + name
		if err := sprite(field, c.Sprite); err != nil {
			return err
		}
		if c.Frame[0] < 1 || c.Frame[1] < 1 {
			return bad(field+".frame", "must be a positive width and height")
		}
		for _, a := range RequiredAnimations {
			if _, ok := c.Animations[a]; !ok {
				return bad(field+".animations", "lacks %q (every character has %s)", a, strings.Join(RequiredAnimations, ", "))
			}
		}
		for _, an := range sortedKeys(c.Animations) {
			a := c.Animations[an]
			if len(a.Frames) == 0 || a.FPS < 1 || a.FPS > 60 {
				return bad(field+".animations."+an, "needs at least one frame and fps between 1 and 60")
			}
			for _, f := range a.Frames {
				if f < 0 || f > 255 {
					return bad(field+".animations."+an, "frame %d is not between 0 and 255", f)
				}
			}
		}
	}
	if m.Portal != nil {
		if err := sprite("portal", *m.Portal); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(m.UI) {
		if err := sprite("ui."+name, m.UI[name]); err != nil {
			return err
		}
	}
	return nil
}

// CheckPath reports whether p is an acceptable file path inside a set: relative,
// '/'-separated, clean (no "..", ".", empty or repeated separators), at most
// MaxPathLength bytes of a-z, A-Z, 0-9 and "._-/", not the manifest itself.
func CheckPath(p string) error {
	bad := func(format string, args ...any) error { return refuse(ReasonBadPath, p, format, args...) }
	switch {
	case p == "":
		return bad("is empty")
	case len(p) > MaxPathLength:
		return bad("is longer than %d bytes", MaxPathLength)
	case strings.HasPrefix(p, "/"):
		return bad("is absolute")
	case p == ManifestName:
		return bad("is the manifest")
	}
	for _, part := range strings.Split(p, "/") {
		switch {
		case part == "..":
			return bad("leaves the set directory (\"..\")")
		case strings.HasPrefix(part, ".") && part != ".":
			return bad("names a hidden file or directory")
		}
	}
	if path.Clean(p) != p {
		return bad("is not clean (use %q)", path.Clean(p))
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-/", c) >= 0) {
			return bad("has %q: use only a-z, A-Z, 0-9 and ._-/", c)
		}
	}
	return nil
}

func validHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func biomeNames() []string {
	var out []string
	for b := mapgen.Biome(0); b.String() != "unknown"; b++ {
		out = append(out, b.String())
	}
	return out
}

func knownBiome(name string) bool {
	for _, b := range biomeNames() {
		if b == name {
			return true
		}
	}
	return false
}
