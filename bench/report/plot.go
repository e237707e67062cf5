package report

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Plot is a line chart of several series, drawn by [Plot.WriteSVG] or
// [Plot.WritePNG]. Each series is labelled directly beside its line, in its
// colour, so there is no legend to hunt through.
type Plot struct {
	Title  string
	X, Y   Axis
	Series []Series
	// Width and Height are the size in pixels; zero means 800 × 500.
	Width, Height int
}

// Axis describes one axis.
type Axis struct {
	Label string
	Scale Scale
}

// Scale maps data values to an axis.
type Scale uint8

// The scales.
const (
	// Linear starts at zero (or the smallest value, if negative).
	Linear Scale = iota
	// Log10 spans whole decades; ticks at 1, 10, 100, …
	Log10
	// Log2 spans whole powers of two, ticks labelled as sizes: 8, 1K, 1M.
	Log2
	// Nines plots a cumulative fraction p as -log10(1-p), so that p50,
	// p90, p99, p99.9, p99.99 and p99.999 are evenly spread; p ≥ 0.99999
	// is drawn at the top.
	Nines
)

// Series is one line: points in data units, in drawing order.
type Series struct {
	Label  string
	Points []Point
	// Dashed draws the line dashed, e.g. for a socket baseline beside an
	// RDMA result.
	Dashed bool
	// LabelAt is the index of the point the label is drawn beside; -1 (or
	// out of range) means the last point.
	LabelAt int
}

// Point is a data point.
type Point struct{ X, Y float64 }

const (
	defaultWidth  = 800
	defaultHeight = 500
	ninesTop      = 5 // p99.999
)

// The axes of more than one kind of plot: message size and latency.
var (
	sizeAxis    = Axis{Label: "message size (bytes)", Scale: Log2}
	latencyAxis = Axis{Label: "one-way latency (µs)", Scale: Log10}
)

// LatencyCDF returns a plot of latency distributions: x is latency in µs on
// a log scale, y the cumulative fraction on a [Nines] scale.
func LatencyCDF(title string, series ...Series) *Plot {
	return &Plot{Title: title, X: latencyAxis, Y: Axis{Label: "percentile", Scale: Nines}, Series: series}
}

// BandwidthVsSize returns a plot of bandwidth in MB/s (10^6 B/s) against
// message size on a log2 scale.
func BandwidthVsSize(title string, series ...Series) *Plot {
	return &Plot{Title: title, X: sizeAxis, Y: Axis{Label: "bandwidth (MB/s)", Scale: Linear}, Series: series}
}

// CDFSeries returns the latency distribution of r as a series. It uses the
// histogram when r has one, and the percentiles (min, p50, … p99.99, max)
// otherwise. The label sits at the median.
func CDFSeries(label string, r *Result) Series {
	s := Series{Label: label, Dashed: isSocket(r.Transport)}
	if len(r.Histogram) > 0 {
		s.Points = histogramCDF(r.Histogram)
	} else if l := r.Latency; l != nil {
		s.Points = []Point{{l.Min, 0}, {l.P50, 0.5}, {l.P90, 0.9}, {l.P99, 0.99},
			{l.P999, 0.999}, {l.P9999, 0.9999}, {l.Max, 1}}
	}
	s.LabelAt = slices.IndexFunc(s.Points, func(p Point) bool { return p.Y >= 0.5 })
	return s
}

// histogramCDF returns the cumulative fraction at the upper bound of each
// bucket, starting from 0 at the lower bound of the first.
func histogramCDF(bs []Bucket) []Point {
	var total, cum uint64
	for _, b := range bs {
		total += b.Count
	}
	pts := []Point{{bs[0].LoUS, 0}}
	for _, b := range bs {
		cum += b.Count
		pts = append(pts, Point{b.HiUS, float64(cum) / float64(total)})
	}
	return pts
}

// BandwidthSeries returns bandwidth against size for the results that have
// a bandwidth, sorted by size.
func BandwidthSeries(label string, results []Result) Series {
	s := Series{Label: label, LabelAt: -1}
	for i := range results {
		if r := &results[i]; r.Throughput != nil {
			s.Points = append(s.Points, Point{float64(r.Size), r.BandwidthMBps})
			s.Dashed = s.Dashed || isSocket(r.Transport)
		}
	}
	slices.SortFunc(s.Points, func(a, b Point) int { return cmp.Compare(a.X, b.X) })
	return s
}

// isSocket reports whether a transport name is a socket baseline, drawn
// dashed.
func isSocket(transport string) bool {
	t := strings.ToLower(transport)
	return t == "tcp" || t == "udp" || strings.Contains(t, "sock")
}

// PlotResults chooses the plot for a run: bandwidth against size when any
// result has a bandwidth, one series per test and transport; otherwise the
// latency CDF of the results of the given size (the smallest size present
// when size is 0), one series per test and transport.
func PlotResults(title string, results []Result, size int64) (*Plot, error) {
	groups, order := groupResults(results)
	var bw []Series
	for _, key := range order {
		if s := BandwidthSeries(key, groups[key]); len(s.Points) > 0 {
			bw = append(bw, s)
		}
	}
	if len(bw) > 0 {
		return BandwidthVsSize(title, bw...), nil
	}
	if size == 0 {
		size = smallestLatencySize(results)
	}
	var cdf []Series
	for _, key := range order {
		for _, r := range groups[key] {
			if r.Latency != nil && r.Size == size {
				cdf = append(cdf, CDFSeries(key, &r))
				break
			}
		}
	}
	if len(cdf) == 0 {
		return nil, fmt.Errorf("report: nothing to plot: no bandwidth result and no latency result of size %s", FormatSize(size))
	}
	return LatencyCDF(fmt.Sprintf("%s (%s)", title, FormatSize(size)), cdf...), nil
}

// groupResults groups results by "test transport", keeping first-seen order.
func groupResults(results []Result) (map[string][]Result, []string) {
	groups := map[string][]Result{}
	var order []string
	for _, r := range results {
		key := r.Test + " " + r.Transport
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], r)
	}
	return groups, order
}

func smallestLatencySize(results []Result) int64 {
	size := int64(math.MaxInt64)
	for _, r := range results {
		if r.Latency != nil {
			size = min(size, r.Size)
		}
	}
	return size
}

// WriteFile writes the plot to path, as PNG when the name ends in .png
// (any case) and as SVG otherwise.
func (p *Plot) WriteFile(path string) error { return writeImage(path, p.WriteSVG, p.WritePNG) }

// writeImage creates path and writes it with png when the name ends in
// .png (any case), with svg otherwise.
func writeImage(path string, svg, png func(io.Writer) error) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if strings.EqualFold(filepath.Ext(path), ".png") {
		return png(f)
	}
	return svg(f)
}

// WriteSVG writes the plot as a standalone SVG document.
func (p *Plot) WriteSVG(w io.Writer) error { return writeSVG(p, w) }

// WritePNG writes the plot as a PNG image of Width × Height pixels.
func (p *Plot) WritePNG(w io.Writer) error { return writePNG(p, w) }

// drawing is what a plot and a figure have in common: a size and a way
// to draw on any canvas.
type drawing interface {
	size() (int, int)
	draw(canvas)
}

func writeSVG(d drawing, w io.Writer) error {
	c := newSVG(d.size())
	d.draw(c)
	return c.finish(w)
}

func writePNG(d drawing, w io.Writer) error {
	c := newRaster(d.size())
	d.draw(c)
	return c.encode(w)
}

func (p *Plot) size() (int, int) {
	w, h := p.Width, p.Height
	if w <= 0 || h <= 0 {
		w, h = defaultWidth, defaultHeight
	}
	return w, h
}
