package report

import (
	"image/color"
	"math"
	"strconv"
)

// canvas is what a plot is drawn on: an SVG document or a raster image.
// Coordinates are pixels from the top left.
type canvas interface {
	polyline(pts []pt, c color.RGBA, width float64, dashed bool)
	marker(p pt, c color.RGBA) // a dot marking a data point
	// text draws s with its vertical middle at y, starting, centred on or
	// ending at x according to a.
	text(x, y float64, s string, c color.RGBA, a anchor)
	charWidth() float64  // advance of one character
	lineHeight() float64 // height of a line of text
}

type pt struct{ X, Y float64 }

type anchor uint8

const (
	anchorStart anchor = iota
	anchorMiddle
	anchorEnd
)

var (
	black = color.RGBA{0, 0, 0, 255}
	grey  = color.RGBA{0x55, 0x55, 0x55, 255}
	grid  = color.RGBA{0xdd, 0xdd, 0xdd, 255}
	white = color.RGBA{255, 255, 255, 255}
	// palette is Okabe and Ito's, distinguishable with colour blindness.
	palette = []color.RGBA{
		{0x00, 0x72, 0xB2, 255}, {0xD5, 0x5E, 0x00, 255}, {0x00, 0x9E, 0x73, 255},
		{0xCC, 0x79, 0xA7, 255}, {0xE6, 0x9F, 0x00, 255}, {0x56, 0xB4, 0xE9, 255},
		{0x00, 0x00, 0x00, 255},
	}
)

// scaler maps one axis's data values to pixels.
type scaler struct {
	scale  Scale
	lo, hi float64 // range in transformed units
	p0, p1 float64 // pixels of lo and hi
}

// transform maps a data value into the axis's linear space; false when the
// value cannot be drawn (not positive on a log scale).
func transform(s Scale, v float64) (float64, bool) {
	switch s {
	case Log10:
		return math.Log10(v), v > 0
	case Log2:
		return math.Log2(v), v > 0
	case Nines:
		if v >= 1 {
			return ninesTop, true
		}
		return min(-math.Log10(1-v), ninesTop), v >= 0
	}
	return v, !math.IsNaN(v) && !math.IsInf(v, 0)
}

// pix returns the pixel coordinate of data value v.
func (s scaler) pix(v float64) (float64, bool) {
	t, ok := transform(s.scale, v)
	return s.at(t), ok
}

// at returns the pixel coordinate of t, in transformed units.
func (s scaler) at(t float64) float64 {
	return s.p0 + (t-s.lo)/(s.hi-s.lo)*(s.p1-s.p0)
}

// tick is a grid line at a transformed position, labelled unless label is
// empty.
type tick struct {
	at    float64
	label string
}

// axisRange returns the range of the axis in transformed units, widened to
// whole decades, powers of two or tick steps.
func axisRange(s Scale, vals []float64) (lo, hi float64) {
	if s == Nines {
		return 0, ninesTop
	}
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if t, ok := transform(s, v); ok {
			lo, hi = min(lo, t), max(hi, t)
		}
	}
	switch {
	case lo > hi: // no drawable value
		return 0, 1
	case s == Linear:
		lo = min(lo, 0)
		if hi <= lo {
			hi = lo + 1
		}
		step := niceStep((hi - lo) / 5)
		return math.Floor(lo/step) * step, math.Ceil(hi/step) * step
	}
	lo, hi = math.Floor(lo), math.Ceil(hi)
	if hi == lo { // one value: centre it
		lo, hi = lo-1, hi+1
	}
	return lo, hi
}

// niceStep returns 1, 2 or 5 times a power of ten, at least x.
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// ticks returns the grid lines of an axis over [lo, hi], labelling at most
// about maxLabels of them on a Log2 axis.
func ticks(s Scale, lo, hi float64, maxLabels int) []tick {
	var out []tick
	switch s {
	case Nines:
		for i, l := range []string{"0%", "50%", "90%", "99%", "99.9%", "99.99%", "99.999%"} {
			at := float64(i - 1)
			if i == 0 {
				at = 0
			} else if i == 1 {
				at = math.Log10(2)
			}
			out = append(out, tick{at, l})
		}
	case Log10:
		for k := lo; k <= hi; k++ {
			out = append(out, tick{k, formatNumber(math.Pow(10, k), 0)})
			for _, m := range []float64{2, 5} {
				if at := k + math.Log10(m); at < hi {
					out = append(out, tick{at, labelIf(hi-lo <= 2, formatNumber(m*math.Pow(10, k), 0))})
				}
			}
		}
	case Log2:
		stride := math.Ceil((hi - lo + 1) / float64(max(maxLabels, 1)))
		for k := lo; k <= hi; k++ {
			out = append(out, tick{k, labelIf(math.Mod(k-lo, stride) == 0, shortSize(int64(math.Exp2(k))))})
		}
	default:
		step := niceStep((hi - lo) / 5)
		digits := max(0, int(-math.Floor(math.Log10(step))))
		for v := lo; v <= hi+step/2; v += step {
			out = append(out, tick{v, formatNumber(v, digits)})
		}
	}
	return out
}

func labelIf(ok bool, s string) string {
	if ok {
		return s
	}
	return ""
}

// formatNumber formats a tick value: at least digits decimals, and the
// shortest exact form for small values such as 0.01.
func formatNumber(v float64, digits int) string {
	if math.Abs(v) < 1 && v != 0 && digits == 0 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'f', digits, 64)
}
