package report

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/bench/stats"
)

// sweepResults is a latency size sweep (write-lat beside tcp-lat) and a
// bandwidth sweep: what goverbs bench --test write-lat,write-bw --all makes.
func sweepResults() []Result {
	var rs []Result
	for i, size := range []int64{8, 1 << 10, 64 << 10, 1 << 20, 2 << 20} {
		rdma, tcp := stats.NewRecorder(8, stats.RoundTrip), stats.NewRecorder(8, stats.RoundTrip)
		for j := range int64(8) {
			rdma.Record(4000 + int64(i)*3000 + j*100)
			tcp.Record(9000 + int64(i)*4000 + j*150)
		}
		rs = append(rs, NewLatency("write-lat", "iwarp", size, rdma), NewLatency("tcp-lat", "tcp", size, tcp))
	}
	return append(rs, bandwidthResults()...)
}

// Every result of the run is on the figure: latency against size (every
// size), latency distributions (smallest and largest size of a long sweep)
// and bandwidth against size, each RDMA series beside its dashed baseline.
func TestFigureDrawsEveryResult(t *testing.T) {
	f, err := FigureOf("run", sweepResults())
	if err != nil {
		t.Fatal(err)
	}
	var scales []string
	for _, p := range f.Panels {
		scales = append(scales, p.X.Scale.name()+"/"+p.Y.Scale.name())
	}
	want := []string{"log2/log10", "log10/nines", "log10/nines", "log2/linear"}
	if !slices.Equal(scales, want) {
		t.Fatalf("panels %v, want %v", scales, want)
	}
	if n := len(f.Panels[0].Series[0].Points); n != 5 {
		t.Errorf("latency against size has %d points, want every size (5)", n)
	}
	var buf bytes.Buffer
	if err := f.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	_, texts, polylines := svgTexts(t, buf.Bytes())
	for _, label := range []string{"write-lat iwarp p50", "tcp-lat tcp p50", "write-lat iwarp", "tcp-lat tcp",
		"write-bw iwarp", "tcp-bw tcp", "run (8 B)", "run (2 MiB)", "run: bandwidth", "run: latency against size"} {
		if !slices.Contains(texts, label) {
			t.Errorf("SVG lacks %q; texts %q", label, texts)
		}
	}
	if polylines < 8 {
		t.Errorf("%d polylines: a series is missing", polylines)
	}
	_, height := f.size()
	if height != 4*defaultHeight || !strings.Contains(buf.String(), `height="2000"`) {
		t.Errorf("figure height %d", height)
	}
	// Every text sits inside the drawing: nothing clipped on the right.
	for _, x := range svgTextRightEdges(t, buf.Bytes()) {
		if x > defaultWidth {
			t.Errorf("a text ends at x=%.0f, beyond the %d-pixel width", x, defaultWidth)
		}
	}
	buf.Reset()
	if err := f.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil || img.Bounds().Dy() != 4*defaultHeight {
		t.Fatalf("PNG: %v, %v", err, img.Bounds())
	}
	if dir := os.Getenv("GOVERBS_PLOT_DIR"); dir != "" { // to look at it
		f.WriteFile(dir + "/figure.png")
	}
}

// A latency-only run at one size is one distribution panel; a run with
// nothing to draw is an error.
func TestFigureSmallRuns(t *testing.T) {
	f, err := FigureOf("run", sampleResults(t)[:2])
	if err != nil || len(f.Panels) != 1 || f.Panels[0].Y.Scale != Nines {
		t.Fatalf("one latency size: %+v, %v", f, err)
	}
	f, err = FigureOf("run", sampleResults(t))
	if err != nil || len(f.Panels) != 2 {
		t.Fatalf("latency and bandwidth at one size each: %v, %v", f, err)
	}
	if _, err := FigureOf("run", nil); err == nil {
		t.Error("a figure of nothing")
	}
}

func (s Scale) name() string {
	return [...]string{"linear", "log10", "log2", "nines"}[s]
}

// svgTextRightEdges returns where each <text> of an SVG document ends,
// from its anchor and its length in the SVG font's advance.
func svgTextRightEdges(t *testing.T, doc []byte) []float64 {
	t.Helper()
	var out []float64
	for line := range strings.SplitSeq(string(doc), "\n") {
		if !strings.HasPrefix(line, "<text ") {
			continue
		}
		var x, y float64
		var fill, anchor string
		if _, err := fmt.Sscanf(line, `<text x="%f" y="%f" fill=%s text-anchor=%s`, &x, &y, &fill, &anchor); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		body := line[strings.Index(line, ">")+1 : strings.LastIndex(line, "</text>")]
		w := float64(len([]rune(body))) * svgCharWidth
		switch {
		case strings.HasPrefix(anchor, `"middle"`):
			x += w / 2
		case strings.HasPrefix(anchor, `"start"`):
			x += w
		}
		out = append(out, x)
	}
	return out
}
