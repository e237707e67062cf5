package report

import (
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
)

// Why a bitmap font and a line rasteriser of our own (font.go, this file:
// about 200 lines) rather than golang.org/x/image's opentype, gofont and
// vector packages: measured with Go 1.26, a program drawing text and lines
// with those packages is 0.67 MB larger than one using only image/png
// (3.43 MB against 2.77 MB), and they would add golang.org/x/image and
// golang.org/x/text to the requirements of every module that imports
// goverbs. What they buy is anti-aliasing; the PNG is the quick look and
// the SVG, drawn by the viewer's own fonts, the figure to publish.

// Raster text: the 5 × 7 font scaled up, with a column of spacing.
const (
	glyphScale = 2
	glyphW     = 5
	glyphH     = 7
)

// Dash pattern of dashed lines, in pixels.
const dashOn, dashPeriod = 8.0, 13.0

// rasterCanvas draws into an RGBA image, without anti-aliasing.
type rasterCanvas struct {
	img *image.RGBA
}

func newRaster(w, h int) *rasterCanvas {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = 255 // opaque white
	}
	return &rasterCanvas{img: img}
}

func (c *rasterCanvas) charWidth() float64  { return (glyphW + 1) * glyphScale }
func (c *rasterCanvas) lineHeight() float64 { return (glyphH + 2) * glyphScale }

func (c *rasterCanvas) encode(w io.Writer) error {
	return png.Encode(w, c.img)
}

// polyline strokes the segments by stamping a square of the line's width
// every half pixel along them, skipping the gaps of a dashed line.
func (c *rasterCanvas) polyline(pts []pt, col color.RGBA, width float64, dashed bool) {
	var dist float64
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		length := math.Hypot(b.X-a.X, b.Y-a.Y)
		steps := max(1, int(math.Ceil(length*2)))
		for s := 0; s <= steps; s++ {
			f := float64(s) / float64(steps)
			if dashed && math.Mod(dist+f*length, dashPeriod) >= dashOn {
				continue
			}
			c.stamp(a.X+f*(b.X-a.X), a.Y+f*(b.Y-a.Y), width, col)
		}
		dist += length
	}
}

func (c *rasterCanvas) marker(p pt, col color.RGBA) {
	c.stamp(p.X, p.Y, 5, col)
}

// stamp fills the square of side width centred on (x, y).
func (c *rasterCanvas) stamp(x, y, width float64, col color.RGBA) {
	r := width / 2
	x0, x1 := int(math.Floor(x-r+0.5)), int(math.Floor(x+r-0.5))
	y0, y1 := int(math.Floor(y-r+0.5)), int(math.Floor(y+r-0.5))
	for py := y0; py <= max(y0, y1); py++ {
		for px := x0; px <= max(x0, x1); px++ {
			c.img.SetRGBA(px, py, col) // outside the image: ignored
		}
	}
}

// text draws s with the bitmap font; characters it lacks draw as a box.
func (c *rasterCanvas) text(x, y float64, s string, col color.RGBA, a anchor) {
	runes := []rune(s)
	w := c.charWidth() * float64(len(runes))
	switch a {
	case anchorMiddle:
		x -= w / 2
	case anchorEnd:
		x -= w
	}
	top := int(math.Round(y - glyphH*glyphScale/2.0))
	for i, r := range runes {
		c.glyph(int(math.Round(x+float64(i)*c.charWidth())), top, r, col)
	}
}

func (c *rasterCanvas) glyph(x, y int, r rune, col color.RGBA) {
	rows, ok := font5x7[r]
	if !ok {
		rows = [glyphH]byte{0x1F, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1F}
	}
	if descenders[r] {
		y += 2 * glyphScale
	}
	for row, bitsRow := range rows {
		for colIdx := range glyphW {
			if bitsRow&(1<<(glyphW-1-colIdx)) == 0 {
				continue
			}
			for dy := range glyphScale {
				for dx := range glyphScale {
					c.img.SetRGBA(x+colIdx*glyphScale+dx, y+row*glyphScale+dy, col)
				}
			}
		}
	}
}
