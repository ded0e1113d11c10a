package defaultset

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"slices"

	"github.com/mapyard/mapyard/mapserver/kernel/raster"
)

// canvas is an RGBA image drawn pixel by pixel, with a seeded random source so every
// run draws the same pixels.
type canvas struct {
	img *image.RGBA
	rng uint64
}

func newCanvas(w, h int, seed string) *canvas {
	s := uint64(1469598103934665603)
	for i := 0; i < len(seed); i++ {
		s = (s ^ uint64(seed[i])) * 1099511628211
	}
	return &canvas{img: image.NewRGBA(image.Rect(0, 0, w, h)), rng: s | 1}
}

// next returns a pseudo-random number in [0, n).
func (c *canvas) next(n int) int {
	c.rng ^= c.rng << 13
	c.rng ^= c.rng >> 7
	c.rng ^= c.rng << 17
	return int(c.rng % uint64(n))
}

func (c *canvas) w() int { return c.img.Rect.Dx() }
func (c *canvas) h() int { return c.img.Rect.Dy() }

func (c *canvas) set(x, y int, col color.RGBA) {
	if x >= 0 && y >= 0 && x < c.w() && y < c.h() {
		c.img.SetRGBA(x, y, col)
	}
}

// setWrap sets a pixel with coordinates wrapped around the edges, so tiles repeat
// without seams.
func (c *canvas) setWrap(x, y int, col color.RGBA) {
	c.img.SetRGBA((x%c.w()+c.w())%c.w(), (y%c.h()+c.h())%c.h(), col)
}

func (c *canvas) at(x, y int) color.RGBA { return c.img.RGBAAt(x, y) }

func (c *canvas) fill(col color.RGBA) { c.rect(0, 0, c.w(), c.h(), col) }

func (c *canvas) rect(x0, y0, w, h int, col color.RGBA) {
	for y := y0; y < y0+h; y++ {
		for x := x0; x < x0+w; x++ {
			c.set(x, y, col)
		}
	}
}

// ellipse fills the ellipse centred on (cx, cy) with radii rx, ry (in half pixels, so
// even sizes centre between pixels).
func (c *canvas) ellipse(cx2, cy2, rx2, ry2 int, col color.RGBA) {
	for y := 0; y < c.h(); y++ {
		for x := 0; x < c.w(); x++ {
			dx, dy := 2*x+1-cx2, 2*y+1-cy2
			if dx*dx*ry2*ry2+dy*dy*rx2*rx2 <= rx2*rx2*ry2*ry2 {
				c.set(x, y, col)
			}
		}
	}
}

// circle fills a circle of radius r around the pixel (cx, cy).
func (c *canvas) circle(cx, cy, r int, col color.RGBA) {
	c.ellipse(2*cx+1, 2*cy+1, 2*r+1, 2*r+1, col)
}

// line draws a line of width 1 from (x0, y0) to (x1, y1).
func (c *canvas) line(x0, y0, x1, y1 int, col color.RGBA) {
	raster.Line(x0, y0, x1, y1, func(x, y int) { c.set(x, y, col) })
}

// speckle scatters n specks of col over the canvas's opaque pixels.
func (c *canvas) speckle(n int, col color.RGBA) {
	for range n {
		if x, y := c.next(c.w()), c.next(c.h()); c.at(x, y).A != 0 {
			c.set(x, y, col)
		}
	}
}

// shade darkens (f < 1000) or lightens (f > 1000) every opaque pixel in the lower
// right (dark) or upper left (light) of each shape, a cheap light from the top left.
func (c *canvas) shadeBelow(f int) {
	out := image.NewRGBA(c.img.Rect)
	copy(out.Pix, c.img.Pix)
	for y := 0; y < c.h(); y++ {
		for x := 0; x < c.w(); x++ {
			p := c.at(x, y)
			if p.A == 0 {
				continue
			}
			if x+1 >= c.w() || y+1 >= c.h() || c.at(x+1, y+1).A == 0 {
				out.SetRGBA(x, y, scale(p, f))
			}
		}
	}
	c.img = out
}

// outline paints every transparent pixel next to an opaque one with a darker copy of
// it: the dark edge that keeps sprites readable over any ground.
func (c *canvas) outline() {
	out := image.NewRGBA(c.img.Rect)
	copy(out.Pix, c.img.Pix)
	for y := 0; y < c.h(); y++ {
		for x := 0; x < c.w(); x++ {
			if c.at(x, y).A != 0 {
				continue
			}
			for _, d := range [4][2]int{{1, 0}, {-1, 0}, {0, 1}, {0, -1}} {
				nx, ny := x+d[0], y+d[1]
				if nx >= 0 && ny >= 0 && nx < c.w() && ny < c.h() && c.at(nx, ny).A != 0 {
					out.SetRGBA(x, y, scale(c.at(nx, ny), 350))
					break
				}
			}
		}
	}
	c.img = out
}

// png encodes the canvas as an indexed PNG (its colours are few), deterministically.
func (c *canvas) png() []byte {
	var cols []color.RGBA
	seen := map[color.RGBA]bool{}
	for i := 0; i+3 < len(c.img.Pix); i += 4 {
		p := color.RGBA{c.img.Pix[i], c.img.Pix[i+1], c.img.Pix[i+2], c.img.Pix[i+3]}
		if p.A == 0 {
			p = color.RGBA{}
		}
		if !seen[p] {
			seen[p] = true
			cols = append(cols, p)
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if len(cols) > 256 {
		_ = enc.Encode(&buf, c.img)
		return buf.Bytes()
	}
	slices.SortFunc(cols, func(a, b color.RGBA) int {
		return int(uint32(a.R)<<24|uint32(a.G)<<16|uint32(a.B)<<8|uint32(a.A)) - int(uint32(b.R)<<24|uint32(b.G)<<16|uint32(b.B)<<8|uint32(b.A))
	})
	pal := make(color.Palette, len(cols))
	index := map[color.RGBA]uint8{}
	for i, col := range cols {
		pal[i] = col
		index[col] = uint8(i)
	}
	img := image.NewPaletted(c.img.Rect, pal)
	for y := 0; y < c.h(); y++ {
		for x := 0; x < c.w(); x++ {
			p := c.at(x, y)
			if p.A == 0 {
				p = color.RGBA{}
			}
			img.SetColorIndex(x, y, index[p])
		}
	}
	_ = enc.Encode(&buf, img)
	return buf.Bytes()
}

func rgb(v uint32) color.RGBA { return color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 255} }

// scale multiplies a colour's channels by f permille, saturating.
func scale(p color.RGBA, f int) color.RGBA {
	ch := func(v uint8) uint8 { return uint8(min(255, int(v)*f/1000)) }
	return color.RGBA{ch(p.R), ch(p.G), ch(p.B), p.A}
}

func abs(v int) int { return max(v, -v) }
