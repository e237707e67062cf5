package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// bandwidthResults returns RDMA and TCP bandwidth results over every size.
func bandwidthResults() []Result {
	var rs []Result
	for _, size := range AllSizes() {
		rdma := time.Duration(float64(size)/2e3*1e3) + 2*time.Microsecond // 2 GB/s, 2 µs per message
		tcp := time.Duration(float64(size)/1.5e3*1e3) + 5*time.Microsecond
		rs = append(rs, NewBandwidth("write-bw", "iwarp", size, 1, rdma), NewBandwidth("tcp-bw", "tcp", size, 1, tcp))
	}
	return rs
}

func testPlots(t *testing.T) map[string]*Plot {
	t.Helper()
	cdf, err := PlotResults("latency", sampleResults(t)[:2], 0)
	if err != nil {
		t.Fatal(err)
	}
	bw, err := PlotResults("bandwidth", bandwidthResults(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if cdf.Y.Scale != Nines || bw.X.Scale != Log2 {
		t.Fatalf("wrong plots chosen: %v, %v", cdf.Y.Scale, bw.X.Scale)
	}
	return map[string]*Plot{"cdf": cdf, "bw": bw}
}

// svgTexts decodes an SVG document as XML, failing on malformed XML, and
// returns the root element's name, the text of its <text> elements and
// the number of <polyline> elements.
func svgTexts(t *testing.T, doc []byte) (root string, texts []string, polylines int) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return root, texts, polylines
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, doc)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			root = cmpOr(root, el.Name.Local)
			inText = el.Name.Local == "text"
			if el.Name.Local == "polyline" {
				polylines++
			}
		case xml.CharData:
			if inText {
				texts = append(texts, string(el))
			}
		case xml.EndElement:
			inText = false
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestSVG(t *testing.T) {
	for name, p := range testPlots(t) {
		var buf bytes.Buffer
		if err := p.WriteSVG(&buf); err != nil {
			t.Fatal(err)
		}
		root, texts, polylines := svgTexts(t, buf.Bytes())
		if root != "svg" || polylines < len(p.Series)+2 {
			t.Errorf("%s: root %q, %d polylines", name, root, polylines)
		}
		for _, s := range p.Series {
			if !slices.Contains(texts, s.Label) {
				t.Errorf("%s: no label %q in %q", name, s.Label, texts)
			}
		}
		for _, want := range []string{p.Title, p.X.Label, p.Y.Label} {
			if !slices.Contains(texts, want) {
				t.Errorf("%s: no text %q", name, want)
			}
		}
		if !strings.Contains(buf.String(), `stroke-dasharray`) {
			t.Errorf("%s: the tcp baseline is not dashed", name)
		}
	}
}

func TestSVGEscapes(t *testing.T) {
	p := LatencyCDF(`a<b & "c"`, Series{Label: "x<y>&z", Points: []Point{{1, 0}, {2, 0.5}, {3, 1}}})
	var buf bytes.Buffer
	if err := p.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	_, texts, _ := svgTexts(t, buf.Bytes())
	if !slices.Contains(texts, "x<y>&z") || !slices.Contains(texts, `a<b & "c"`) {
		t.Errorf("escaped texts lost: %q", texts)
	}
}

func TestPNG(t *testing.T) {
	for name, p := range testPlots(t) {
		for _, size := range [][2]int{{0, 0}, {640, 400}} {
			p.Width, p.Height = size[0], size[1]
			var buf bytes.Buffer
			if err := p.WritePNG(&buf); err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(&buf)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			w, h := p.size()
			if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
				t.Errorf("%s: %v, want %d×%d", name, b, w, h)
			}
			blue := 0
			for y := range h {
				for x := range w {
					r, g, b, _ := img.At(x, y).RGBA()
					if c := palette[0]; r>>8 == uint32(c.R) && g>>8 == uint32(c.G) && b>>8 == uint32(c.B) {
						blue++
					}
				}
			}
			if blue < 100 {
				t.Errorf("%s: %d pixels of the first series' colour: line not drawn", name, blue)
			}
		}
	}
}

func TestWriteFile(t *testing.T) {
	p := testPlots(t)["bw"]
	dir := t.TempDir()
	for _, name := range []string{"bw.svg", "bw.PNG"} {
		path := filepath.Join(dir, name)
		if err := p.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		isPNG := bytes.HasPrefix(data, []byte("\x89PNG"))
		if isPNG != strings.HasSuffix(name, ".PNG") {
			t.Errorf("%s: PNG %v", name, isPNG)
		}
	}
	if err := p.WriteFile(filepath.Join(dir, "missing", "x.svg")); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

func TestPlotResultsChoice(t *testing.T) {
	rs := sampleResults(t)
	p, err := PlotResults("run", rs, 0)
	if err != nil || p.X.Scale != Log2 || len(p.Series) != 2 {
		t.Fatalf("mixed run: %+v, %v; want bandwidth against size", p, err)
	}
	p, err = PlotResults("run", rs[:2], 0)
	if err != nil || p.Y.Scale != Nines || len(p.Series) != 2 || p.Title != "run (8 B)" {
		t.Fatalf("latency run: %+v, %v; want a CDF", p, err)
	}
	if !p.Series[1].Dashed || p.Series[0].Dashed {
		t.Errorf("dashes: %v %v, want the tcp series dashed", p.Series[0].Dashed, p.Series[1].Dashed)
	}
	if _, err := PlotResults("run", rs[:2], 64); err == nil {
		t.Error("plot of an absent size succeeded")
	}
	if _, err := PlotResults("run", nil, 0); err == nil {
		t.Error("plot of nothing succeeded")
	}
}

func TestCDFSeries(t *testing.T) {
	rs := sampleResults(t)
	fromHist := CDFSeries("h", &rs[0])
	if n := len(fromHist.Points); n != len(rs[0].Histogram)+1 || fromHist.Points[n-1].Y != 1 || fromHist.Points[0].Y != 0 {
		t.Errorf("histogram CDF %v", fromHist.Points)
	}
	fromPct := CDFSeries("p", &rs[1]) // no histogram
	if len(fromPct.Points) != 7 || fromPct.Points[1] != (Point{15.5, 0.5}) || fromPct.LabelAt != 1 {
		t.Errorf("percentile CDF %v, label at %d", fromPct.Points, fromPct.LabelAt)
	}
	for i := 1; i < len(fromHist.Points); i++ {
		if a, b := fromHist.Points[i-1], fromHist.Points[i]; b.X < a.X || b.Y < a.Y {
			t.Errorf("CDF not monotone at %d: %v then %v", i, a, b)
		}
	}
}

func TestTicks(t *testing.T) {
	labels := func(ts []tick) []string {
		var out []string
		for _, t := range ts {
			if t.label != "" {
				out = append(out, t.label)
			}
		}
		return out
	}
	tests := []struct {
		scale  Scale
		lo, hi float64
		max    int
		want   []string
	}{
		{Nines, 0, ninesTop, 0, []string{"0%", "50%", "90%", "99%", "99.9%", "99.99%", "99.999%"}},
		{Log10, -1, 2, 0, []string{"0.1", "1", "10", "100"}},
		{Log10, 0, 1, 0, []string{"1", "2", "5", "10"}},
		{Log2, 1, 5, 10, []string{"2", "4", "8", "16", "32"}},
		{Log2, 1, 23, 6, []string{"2", "32", "512", "8K", "128K", "2M"}},
		{Linear, 0, 2000, 0, []string{"0", "500", "1000", "1500", "2000"}},
		{Linear, 0, 1, 0, []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
	}
	for _, tt := range tests {
		if got := labels(ticks(tt.scale, tt.lo, tt.hi, tt.max)); !slices.Equal(got, tt.want) {
			t.Errorf("ticks(%v, %v, %v) = %q, want %q", tt.scale, tt.lo, tt.hi, got, tt.want)
		}
	}
}

func TestAxisRange(t *testing.T) {
	tests := []struct {
		scale  Scale
		vals   []float64
		lo, hi float64
	}{
		{Linear, nil, 0, 1},
		{Linear, []float64{1234, 1999}, 0, 2000},
		{Linear, []float64{5, 5}, 0, 5},
		{Log10, []float64{0.3, 42}, -1, 2},
		{Log10, []float64{10}, 0, 2},
		{Log2, []float64{64 << 10}, 15, 17},
		{Log10, []float64{0, -3, 5}, 0, 1}, // non-positive values cannot be drawn
		{Log2, []float64{2, 8 << 20}, 1, 23},
		{Nines, []float64{0.5}, 0, ninesTop},
	}
	for _, tt := range tests {
		if lo, hi := axisRange(tt.scale, tt.vals); lo != tt.lo || hi != tt.hi {
			t.Errorf("axisRange(%v, %v) = %v, %v; want %v, %v", tt.scale, tt.vals, lo, hi, tt.lo, tt.hi)
		}
	}
}

func TestLabelsApartAndInside(t *testing.T) {
	// Two series with the same points: their labels must not overlap.
	pts := []pt{{100, 300}, {200, 200}, {300, 100}}
	series := []Series{{Label: "first series", LabelAt: 1}, {Label: "second series", LabelAt: 1}}
	area := box{50, 50, 400, 300}
	boxes := placeLabels(series, [][]pt{pts, pts}, area, 7, 16)
	if boxes[0].overlaps(boxes[1]) {
		t.Errorf("labels overlap: %+v", boxes)
	}
	for _, b := range boxes {
		if !b.inside(area) {
			t.Errorf("label %+v outside %+v", b, area)
		}
	}
	none := placeLabels([]Series{{Label: ""}, {Label: "x"}}, [][]pt{pts, nil}, area, 7, 16)
	if none[0].w != 0 || none[1].w != 0 {
		t.Errorf("labels placed for a series without label or points: %+v", none)
	}
}

func TestEmptyPlot(t *testing.T) {
	p := BandwidthVsSize("empty")
	if err := p.WriteSVG(io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := p.WritePNG(io.Discard); err != nil {
		t.Fatal(err)
	}
}

func TestFontCoversLabels(t *testing.T) {
	text := "write-lat iwarp tcp-lat 99.999% one-way latency (µs) message size (bytes) bandwidth (MB/s) 128K 2M 0.1 percentile"
	for _, r := range text {
		if _, ok := font5x7[r]; !ok {
			t.Errorf("font lacks %q", r)
		}
	}
	for r := 'a'; r <= 'z'; r++ {
		if _, ok := font5x7[r]; !ok {
			t.Errorf("font lacks %q", r)
		}
	}
	for r := 'A'; r <= 'Z'; r++ {
		if _, ok := font5x7[r]; !ok {
			t.Errorf("font lacks %q", r)
		}
	}
}
