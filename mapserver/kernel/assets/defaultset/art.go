package defaultset

import (
	"image/color"
)

// Terrain tiles: TileSize pixels covering TileMetres of ground.
const (
	tileSize   = 32
	tileMetres = 8
)

// terrainTile draws the tile of a biome: a base colour with texture that repeats
// without seams.
func terrainTile(biome string) *canvas {
	c := newCanvas(tileSize, tileSize, "terrain/"+biome)
	switch biome {
	case "water":
		c.fill(rgb(0x2f6fa8))
		c.speckle(60, rgb(0x3479b5))
		for range 6 { // wave crests
			x, y := c.next(tileSize), c.next(tileSize)
			for i := range 5 {
				c.setWrap(x+i, y-abs(i-2)/2, rgb(0x8cc4e8))
			}
		}
	case "beach":
		c.fill(rgb(0xe2cf94))
		c.speckle(90, rgb(0xd3bd7c))
		c.speckle(30, rgb(0xf0e2b0))
		c.speckle(6, rgb(0xa89468))
	case "grassland":
		c.fill(rgb(0x6aa84f))
		c.speckle(120, rgb(0x5c9944))
		c.speckle(50, rgb(0x7dbb5c))
		for range 14 { // blades
			x, y := c.next(tileSize), c.next(tileSize)
			c.setWrap(x, y, rgb(0x4f8a3a))
			c.setWrap(x, y-1, rgb(0x4f8a3a))
		}
	case "forest":
		c.fill(rgb(0x3f7a3a))
		c.speckle(140, rgb(0x356b31))
		c.speckle(40, rgb(0x4d8c44))
		c.speckle(12, rgb(0x6b5a33)) // fallen needles
	case "desert":
		c.fill(rgb(0xd9b26b))
		c.speckle(100, rgb(0xc9a15c))
		for range 5 { // ripples
			x, y := c.next(tileSize), c.next(tileSize)
			for i := range 7 {
				c.setWrap(x+i, y+i/3, rgb(0xe8c88a))
			}
		}
	case "rock":
		c.fill(rgb(0x8a8580))
		c.speckle(120, rgb(0x7a756f))
		c.speckle(50, rgb(0x9d9892))
		for range 4 { // cracks
			x, y := c.next(tileSize), c.next(tileSize)
			for i := range 6 {
				c.setWrap(x+i, y+c.next(2), rgb(0x5f5a55))
			}
		}
	case "snow":
		c.fill(rgb(0xeef3f7))
		c.speckle(80, rgb(0xdde6ee))
		c.speckle(20, rgb(0xffffff))
	}
	return c
}

// propArt is how one prop kind is drawn: the canvas size, its anchor (where it
// stands), pixels per metre and footprint in centimetres.
type propArt struct {
	w, h, ax, ay, ppm int
	footprint         [2]int
	draw              func(c *canvas)
}

var (
	trunk     = rgb(0x6b4a2b)
	leaf      = rgb(0x3e8e3a)
	leafLight = rgb(0x5fb04f)
	pineDark  = rgb(0x2a6b3c)
	stone     = rgb(0x9a958e)
	stoneLit  = rgb(0xb9b4ad)
	sandstone = rgb(0xc9b48a)
)

// props draws every prop kind the generator knows (mapgen.PropKindNames); a kind not
// listed here gets propFallback.
var props = map[string]propArt{
	"oak": {32, 40, 16, 38, 8, [2]int{120, 120}, func(c *canvas) {
		c.rect(14, 24, 4, 15, trunk)
		c.circle(16, 15, 11, leaf)
		c.circle(10, 19, 6, leaf)
		c.circle(22, 19, 6, leaf)
		c.circle(13, 11, 5, leafLight)
		c.speckle(25, rgb(0x2f7530))
	}},
	"pine": {24, 44, 12, 42, 8, [2]int{90, 90}, func(c *canvas) {
		c.rect(11, 34, 3, 9, trunk)
		for i, w := range []int{4, 7, 9, 11} {
			y := 4 + i*8
			for dy := range 10 {
				half := w * dy / 10
				c.rect(12-half, y+dy, 2*half+1, 1, pineDark)
			}
		}
		c.speckle(12, rgb(0x3d8a50))
	}},
	"bush": {20, 14, 10, 13, 8, [2]int{100, 80}, func(c *canvas) {
		c.ellipse(20, 18, 18, 9, leaf)
		c.circle(7, 5, 3, leafLight)
		c.speckle(8, rgb(0xd04a6a))
	}},
	"flowers": {16, 10, 8, 9, 8, [2]int{80, 60}, func(c *canvas) {
		for i := range 7 {
			x, y := 2+c.next(12), 3+c.next(6)
			c.line(x, y, x, 9, rgb(0x3e7a30))
			c.set(x, y, []color.RGBA{rgb(0xf2d13a), rgb(0xe85f8a), rgb(0xffffff), rgb(0x9b6bd6)}[i%4])
			c.set(x+1, y, rgb(0xf7e7a0))
		}
	}},
	"boulder": {28, 20, 14, 18, 8, [2]int{300, 220}, func(c *canvas) {
		c.ellipse(28, 24, 26, 16, stone)
		c.ellipse(22, 16, 14, 8, stoneLit)
		c.speckle(14, rgb(0x7f7a73))
	}},
	"pebbles": {14, 8, 7, 7, 8, [2]int{60, 40}, func(c *canvas) {
		c.circle(3, 5, 1, stone)
		c.circle(8, 4, 2, stoneLit)
		c.circle(11, 6, 1, stone)
	}},
	"pillar": {14, 36, 7, 35, 8, [2]int{140, 140}, func(c *canvas) {
		c.rect(1, 0, 12, 4, sandstone)
		c.rect(3, 4, 8, 28, rgb(0xd9c69c))
		c.rect(1, 32, 12, 4, sandstone)
		c.line(6, 6, 6, 30, rgb(0xb8a47a))
		c.line(9, 12, 8, 17, rgb(0x8f7d58)) // crack
	}},
	"wall-fragment": {36, 22, 18, 21, 8, [2]int{400, 120}, func(c *canvas) {
		for row := range 5 {
			off := (row % 2) * 3
			for x := -off; x < 36; x += 7 {
				top := 20 - row*4
				if row > 2 && (x < 6 || x > 26) {
					continue // broken top
				}
				c.rect(x+1, top-3, 6, 3, []color.RGBA{sandstone, rgb(0xbfa97d)}[c.next(2)])
			}
		}
	}},
	"cactus": {16, 28, 8, 27, 8, [2]int{80, 80}, func(c *canvas) {
		g := rgb(0x4f9a4a)
		c.rect(6, 3, 4, 24, g)
		c.rect(2, 10, 3, 8, g)
		c.rect(2, 16, 5, 2, g)
		c.rect(11, 7, 3, 8, g)
		c.rect(9, 13, 4, 2, g)
		c.speckle(10, rgb(0xe8f0c0))
	}},
	"dead-tree": {24, 36, 12, 35, 8, [2]int{70, 70}, func(c *canvas) {
		b := rgb(0x7a6048)
		c.rect(11, 14, 3, 22, b)
		c.line(12, 16, 4, 6, b)
		c.line(12, 20, 20, 9, b)
		c.line(6, 9, 3, 3, b)
		c.line(18, 11, 22, 6, b)
		c.line(13, 14, 14, 2, b)
	}},
	"dune-grass": {16, 12, 8, 11, 8, [2]int{60, 40}, func(c *canvas) {
		for i := range 6 {
			x := 2 + i*2
			c.line(8, 11, x, 1+c.next(5), rgb(0xb5a55a))
		}
	}},
	"palm": {32, 44, 16, 43, 8, [2]int{80, 80}, func(c *canvas) {
		b := rgb(0x8a6a3e)
		for y := 10; y < 44; y++ {
			c.rect(15+(44-y)/12-(44-y)/8, y, 3, 1, b)
		}
		f := rgb(0x3f9a48)
		for _, e := range [][4]int{{16, 10, 2, 16}, {16, 10, 30, 16}, {16, 10, 6, 4}, {16, 10, 26, 4}, {16, 10, 16, 2}} {
			c.line(e[0], e[1], e[2], e[3], f)
			c.line(e[0], e[1]+1, e[2], e[3]+1, f)
		}
		c.circle(16, 11, 2, rgb(0x6b4a2b))
	}},
	"driftwood": {24, 8, 12, 7, 8, [2]int{260, 60}, func(c *canvas) {
		c.rect(2, 3, 20, 3, rgb(0xb0a08a))
		c.line(16, 3, 20, 0, rgb(0xb0a08a))
		c.line(4, 4, 18, 4, rgb(0x938470))
	}},
	"reed": {12, 20, 6, 19, 8, [2]int{40, 40}, func(c *canvas) {
		for i := range 4 {
			x := 2 + i*2
			c.line(x, 19, x+c.next(3)-1, 4+c.next(4), rgb(0x6f8a3a))
			c.rect(x, 3+c.next(4), 2, 3, rgb(0x7a5432))
		}
	}},
	"snow-pine": {24, 44, 12, 42, 8, [2]int{90, 90}, func(c *canvas) {
		c.rect(11, 34, 3, 9, trunk)
		for i, w := range []int{4, 7, 9, 11} {
			y := 4 + i*8
			for dy := range 10 {
				half := w * dy / 10
				col := pineDark
				if dy < 3 {
					col = rgb(0xf2f6fa)
				}
				c.rect(12-half, y+dy, 2*half+1, 1, col)
			}
		}
	}},
	"ice-rock": {28, 22, 14, 20, 8, [2]int{240, 180}, func(c *canvas) {
		c.ellipse(28, 26, 24, 16, rgb(0xa9c8de))
		c.ellipse(20, 18, 12, 8, rgb(0xe3f0f8))
		c.line(8, 14, 14, 20, rgb(0x7fa6c0))
	}},
}

// propFallback draws a prop kind the set has no drawing for: a marker post.
var propFallback = propArt{12, 20, 6, 19, 8, [2]int{60, 60}, func(c *canvas) {
	c.rect(5, 6, 2, 14, trunk)
	c.rect(2, 2, 8, 6, rgb(0xd0b040))
}}

// iconSize is the side of an item icon in pixels.
const iconSize = 16

// itemIcon draws the icon of an item template; templates without a drawing of their
// own get a bag.
func itemIcon(id string) *canvas {
	c := newCanvas(iconSize, iconSize, "items/"+id)
	gold, steel, wood := rgb(0xf2c230), rgb(0xc8d0d8), rgb(0x8a5a30)
	switch id {
	case "coin":
		c.circle(7, 8, 5, gold)
		c.circle(7, 8, 3, rgb(0xffe27a))
		c.rect(7, 6, 1, 5, rgb(0xc99a18))
	case "apple":
		c.circle(7, 9, 5, rgb(0xd8322a))
		c.circle(5, 7, 1, rgb(0xf58a80))
		c.line(7, 4, 8, 1, wood)
		c.rect(9, 2, 3, 2, rgb(0x4f9a3a))
	case "potion":
		c.circle(7, 10, 4, rgb(0xd0304a))
		c.rect(6, 2, 3, 5, rgb(0xcfe4ee))
		c.rect(5, 1, 5, 2, wood)
		c.set(5, 9, rgb(0xff8aa0))
	case "torch":
		c.line(4, 14, 9, 6, wood)
		c.line(5, 14, 10, 6, wood)
		c.circle(10, 4, 3, rgb(0xf08a20))
		c.circle(10, 4, 1, rgb(0xffe070))
	case "sword":
		c.line(3, 12, 12, 3, steel)
		c.line(4, 12, 13, 3, steel)
		c.line(2, 9, 6, 13, gold)
		c.line(1, 14, 3, 12, wood)
	case "shield":
		c.ellipse(16, 14, 11, 12, wood)
		c.rect(7, 3, 2, 11, rgb(0x6a4220))
		c.circle(7, 7, 1, steel)
	case "helmet":
		c.ellipse(16, 16, 11, 9, rgb(0x9a6a3a))
		c.rect(2, 8, 12, 3, rgb(0x7a4e26))
		c.rect(0, 10, 16, 2, rgb(0x6a4220))
	case "armor":
		c.rect(3, 3, 10, 11, steel)
		c.rect(1, 3, 3, 5, steel)
		c.rect(12, 3, 3, 5, steel)
		for y := 4; y < 14; y += 2 {
			for x := 3 + y%4/2; x < 13; x += 2 {
				c.set(x, y, rgb(0x98a0a8))
			}
		}
		c.rect(6, 2, 4, 2, color.RGBA{})
	case "gate-key":
		c.circle(4, 5, 3, gold)
		c.circle(4, 5, 1, color.RGBA{})
		c.rect(6, 5, 8, 2, gold)
		c.rect(11, 7, 2, 3, gold)
		c.rect(13, 7, 1, 2, gold)
	case "relic-shard":
		for y := 1; y < 15; y++ {
			w := min(y, 15-y) / 2
			c.rect(8-w, y, 2*w+1, 1, rgb(0x7a5ad8))
		}
		c.line(7, 3, 6, 9, rgb(0xc8b8ff))
	case "crown":
		c.rect(2, 8, 12, 5, gold)
		for _, x := range []int{2, 7, 12} {
			c.rect(x, 4, 2, 4, gold)
			c.set(x, 3, rgb(0xffe27a))
		}
		c.set(7, 10, rgb(0xd8322a))
		c.set(4, 10, rgb(0x3a7ad8))
		c.set(11, 10, rgb(0x3ad87a))
	case "ember":
		c.circle(7, 9, 5, rgb(0xd84a1a))
		c.circle(7, 10, 3, rgb(0xf0a030))
		c.circle(7, 11, 1, rgb(0xfff0a0))
		c.set(5, 3, rgb(0xf08a20))
		c.set(10, 2, rgb(0xf08a20))
	default:
		c.circle(7, 9, 5, rgb(0xa07848))
		c.rect(5, 2, 5, 3, rgb(0xa07848))
		c.line(5, 5, 10, 5, rgb(0x5a3a1a))
	}
	c.outline()
	return c
}

// Character sheets: frameW x frameH frames, one row per direction (south, west, east,
// north), three columns (standing, left foot forward, right foot forward).
const (
	frameW = 16
	frameH = 24
)

// directions in the order of the sheet's rows.
var directions = []string{"south", "west", "east", "north"}

// look is how a character kind is dressed.
type look struct {
	skin, hair, tunic, legs, trim color.RGBA
	hood                          bool
}

var looks = map[string]look{
	"player": {skin: rgb(0xf0c8a0), hair: rgb(0x6a3e1e), tunic: rgb(0x2f6fd0), legs: rgb(0x3a3a50), trim: rgb(0xf2c230)},
	"npc":    {skin: rgb(0xd8a878), hair: rgb(0x3a2a1a), tunic: rgb(0x7a8a3a), legs: rgb(0x5a4030), trim: rgb(0x4a3a2a), hood: true},
}

// characterSheet draws a character's sheet.
func characterSheet(kind string) *canvas {
	l := looks[kind]
	c := newCanvas(3*frameW, len(directions)*frameH, "characters/"+kind)
	for row, dir := range directions {
		for col := range 3 {
			drawCharacter(c, col*frameW, row*frameH, dir, col, l)
		}
	}
	c.outline()
	return c
}

// drawCharacter draws one frame with its top left at (x0, y0): step 0 stands, 1 and 2
// put one foot or the other forward.
func drawCharacter(c *canvas, x0, y0 int, dir string, step int, l look) {
	lift := [3][2]int{{0, 0}, {-2, 0}, {0, -2}}[step]
	// legs
	c.rect(x0+5, y0+17, 2, 6+lift[0]/2, l.legs)
	c.rect(x0+9, y0+17, 2, 6+lift[1]/2, l.legs)
	// body
	c.rect(x0+4, y0+10, 8, 8, l.tunic)
	c.rect(x0+4, y0+16, 8, 1, l.trim)
	// arms swing against the legs
	swing := [3]int{0, 1, -1}[step]
	switch dir {
	case "east":
		c.rect(x0+7+swing, y0+11, 2, 6, scale(l.tunic, 800))
	case "west":
		c.rect(x0+7-swing, y0+11, 2, 6, scale(l.tunic, 800))
	default:
		c.rect(x0+2, y0+11+swing, 2, 6, scale(l.tunic, 850))
		c.rect(x0+12, y0+11-swing, 2, 6, scale(l.tunic, 850))
	}
	// head
	hair := l.hair
	if l.hood {
		hair = scale(l.tunic, 750)
	}
	c.ellipse(2*x0+16, 2*y0+12, 11, 11, l.skin)
	switch dir {
	case "north":
		c.ellipse(2*x0+16, 2*y0+11, 12, 11, hair)
	case "south":
		c.rect(x0+3, y0+1, 10, 3, hair)
		c.set(x0+6, y0+6, rgb(0x202028))
		c.set(x0+9, y0+6, rgb(0x202028))
	case "east":
		c.rect(x0+3, y0+1, 10, 3, hair)
		c.rect(x0+3, y0+1, 4, 7, hair)
		c.set(x0+10, y0+6, rgb(0x202028))
	case "west":
		c.rect(x0+3, y0+1, 10, 3, hair)
		c.rect(x0+9, y0+1, 4, 7, hair)
		c.set(x0+5, y0+6, rgb(0x202028))
	}
	if l.hood && dir != "north" {
		c.rect(x0+2, y0+2, 2, 7, hair)
		c.rect(x0+12, y0+2, 2, 7, hair)
	}
}

// portalArt draws the portal: a ring of violet light standing on a stone base.
func portalArt() *canvas {
	c := newCanvas(32, 40, "portal")
	c.ellipse(32, 74, 30, 8, rgb(0x6f6a66))
	c.ellipse(32, 40, 26, 34, rgb(0x8a3ad8))
	c.ellipse(32, 40, 20, 28, rgb(0xb070f0))
	c.ellipse(32, 40, 14, 22, rgb(0x3a1a70))
	c.ellipse(32, 42, 8, 14, rgb(0x5a2aa0))
	for range 10 {
		x, y := 6+c.next(20), 4+c.next(30)
		if c.at(x, y).A != 0 {
			c.set(x, y, rgb(0xf0e0ff))
		}
	}
	c.outline()
	return c
}

// placeholderArt is what the page draws for a sprite no set has: a checker no one
// takes for real art.
func placeholderArt() *canvas {
	c := newCanvas(16, 16, "placeholder")
	for y := range 16 {
		for x := range 16 {
			col := rgb(0xff00ff)
			if (x/4+y/4)%2 == 1 {
				col = rgb(0x101010)
			}
			c.set(x, y, col)
		}
	}
	return c
}
