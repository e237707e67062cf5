package report

import (
	"encoding/xml"
	"fmt"
	"image/color"
	"io"
	"strings"
)

// SVG text metrics: monospace, so that the layout can size labels exactly.
const (
	svgFontSize  = 12
	svgCharWidth = 0.6 * svgFontSize
)

// svgCanvas builds an SVG document by hand.
type svgCanvas struct {
	sb   strings.Builder
	w, h int
}

func newSVG(w, h int) *svgCanvas {
	c := &svgCanvas{w: w, h: h}
	fmt.Fprintf(&c.sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="monospace" font-size="%d">`+"\n",
		w, h, w, h, svgFontSize)
	fmt.Fprintf(&c.sb, `<rect width="%d" height="%d" fill="%s"/>`+"\n", w, h, hex(white))
	return c
}

func (c *svgCanvas) charWidth() float64  { return svgCharWidth }
func (c *svgCanvas) lineHeight() float64 { return svgFontSize * 1.4 }

func (c *svgCanvas) polyline(pts []pt, col color.RGBA, width float64, dashed bool) {
	if len(pts) == 0 {
		return
	}
	var coords strings.Builder
	for i, p := range pts {
		if i > 0 {
			coords.WriteByte(' ')
		}
		fmt.Fprintf(&coords, "%.1f,%.1f", p.X, p.Y)
	}
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="8 5"`
	}
	fmt.Fprintf(&c.sb, `<polyline points="%s" fill="none" stroke="%s" stroke-width="%g"%s stroke-linejoin="round"/>`+"\n",
		coords.String(), hex(col), width, dash)
}

func (c *svgCanvas) marker(p pt, col color.RGBA) {
	fmt.Fprintf(&c.sb, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", p.X, p.Y, hex(col))
}

func (c *svgCanvas) text(x, y float64, s string, col color.RGBA, a anchor) {
	if s == "" {
		return
	}
	var esc strings.Builder
	xml.EscapeText(&esc, []byte(s)) // a strings.Builder does not fail
	// The baseline sits about 0.35 em below the vertical middle.
	fmt.Fprintf(&c.sb, `<text x="%.1f" y="%.1f" fill="%s" text-anchor="%s">%s</text>`+"\n",
		x, y+0.35*svgFontSize, hex(col), [...]string{"start", "middle", "end"}[a], esc.String())
}

func (c *svgCanvas) finish(w io.Writer) error {
	c.sb.WriteString("</svg>\n")
	_, err := io.WriteString(w, c.sb.String())
	return err
}

func hex(c color.RGBA) string {
	return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B)
}
