package report

import (
	"fmt"
	"image/color"
	"io"
	"slices"
)

// Figure is several plots stacked top to bottom in one image: what
// goverbs bench --plot draws, so that every result of a run is on the
// page. Each panel keeps its own size ([Plot.Width], [Plot.Height]).
type Figure struct {
	Panels []*Plot
}

// maxCDFPanels bounds the latency distributions drawn for a size sweep:
// the smallest and the largest sizes then stand for the rest, which the
// latency-against-size panel shows in full.
const maxCDFPanels = 4

// FigureOf draws every result of a run: latency (p50, and p99 where there
// are several sizes) against size, the latency distribution of each size
// (the smallest and largest of a longer sweep), and bandwidth against size,
// each RDMA series beside its socket baseline (dashed).
func FigureOf(title string, results []Result) (*Figure, error) {
	groups, order := groupResults(results)
	var sizes []int64
	for _, r := range results {
		if r.Latency != nil && !slices.Contains(sizes, r.Size) {
			sizes = append(sizes, r.Size)
		}
	}
	slices.Sort(sizes)
	f := &Figure{}
	if len(sizes) > 1 {
		var lat []Series
		for _, key := range order {
			if s := latencySeries(key, groups[key], func(l *Latency) float64 { return l.P50 }); len(s.Points) > 0 {
				s.Label += " p50"
				lat = append(lat, s)
			}
		}
		f.Panels = append(f.Panels, LatencyVsSize(title+": latency against size", lat...))
	}
	cdfSizes := sizes
	if len(sizes) > maxCDFPanels {
		cdfSizes = []int64{sizes[0], sizes[len(sizes)-1]}
	}
	for _, size := range cdfSizes {
		p, err := PlotResults(title, results, size)
		if err == nil && p.Y.Scale == Nines {
			f.Panels = append(f.Panels, p)
			continue
		}
		// A run with bandwidth results makes PlotResults choose bandwidth:
		// build the distribution panel from the latency results alone.
		var lat []Result
		for _, r := range results {
			if r.Latency != nil {
				lat = append(lat, r)
			}
		}
		if p, err := PlotResults(title, lat, size); err == nil {
			f.Panels = append(f.Panels, p)
		}
	}
	var bw []Series
	for _, key := range order {
		if s := BandwidthSeries(key, groups[key]); len(s.Points) > 0 {
			bw = append(bw, s)
		}
	}
	if len(bw) > 0 {
		f.Panels = append(f.Panels, BandwidthVsSize(title+": bandwidth", bw...))
	}
	if len(f.Panels) == 0 {
		return nil, fmt.Errorf("report: nothing to plot: no latency or bandwidth result")
	}
	return f, nil
}

// LatencyVsSize returns a plot of one-way latency in µs (log scale)
// against message size (log2 scale).
func LatencyVsSize(title string, series ...Series) *Plot {
	return &Plot{Title: title, X: sizeAxis, Y: latencyAxis, Series: series}
}

// latencySeries returns a statistic of each latency result against its
// size, sorted by size.
func latencySeries(label string, results []Result, stat func(*Latency) float64) Series {
	s := Series{Label: label, LabelAt: -1}
	for i := range results {
		if r := &results[i]; r.Latency != nil {
			s.Points = append(s.Points, Point{float64(r.Size), stat(r.Latency)})
			s.Dashed = s.Dashed || isSocket(r.Transport)
		}
	}
	slices.SortFunc(s.Points, func(a, b Point) int {
		switch {
		case a.X < b.X:
			return -1
		case a.X > b.X:
			return 1
		}
		return 0
	})
	return s
}

// size returns the figure's width (the widest panel) and height (the sum).
func (f *Figure) size() (int, int) {
	var w, h int
	for _, p := range f.Panels {
		pw, ph := p.size()
		w, h = max(w, pw), h+ph
	}
	return w, h
}

func (f *Figure) draw(c canvas) {
	y := 0.0
	for _, p := range f.Panels {
		p.draw(shifted{c, y})
		_, ph := p.size()
		y += float64(ph)
	}
}

// WriteSVG writes the figure as one SVG document.
func (f *Figure) WriteSVG(w io.Writer) error { return writeSVG(f, w) }

// WritePNG writes the figure as one PNG image.
func (f *Figure) WritePNG(w io.Writer) error { return writePNG(f, w) }

// WriteFile writes the figure to path, as PNG when the name ends in .png
// (any case) and as SVG otherwise.
func (f *Figure) WriteFile(path string) error { return writeImage(path, f.WriteSVG, f.WritePNG) }

// shifted draws on c moved down by dy: one panel of a figure.
type shifted struct {
	c  canvas
	dy float64
}

func (s shifted) polyline(pts []pt, c color.RGBA, width float64, dashed bool) {
	moved := make([]pt, len(pts))
	for i, p := range pts {
		moved[i] = pt{p.X, p.Y + s.dy}
	}
	s.c.polyline(moved, c, width, dashed)
}

func (s shifted) marker(p pt, c color.RGBA) { s.c.marker(pt{p.X, p.Y + s.dy}, c) }

func (s shifted) text(x, y float64, str string, c color.RGBA, a anchor) {
	s.c.text(x, y+s.dy, str, c, a)
}

func (s shifted) charWidth() float64  { return s.c.charWidth() }
func (s shifted) lineHeight() float64 { return s.c.lineHeight() }
