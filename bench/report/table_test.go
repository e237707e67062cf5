package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteTableGolden(t *testing.T) {
	var sb strings.Builder
	if err := WriteTable(&sb, sampleResults(t)); err != nil {
		t.Fatal(err)
	}
	golden(t, "table.txt", []byte(sb.String()))
	out := sb.String()
	for _, want := range []string{"0.20× tcp-lat p50", "1.25× tcp-bw bw", "10000000 / 6250000", "75000 / 75000",
		"note: iwarp: software transport", "tcp-lat tcp 8 B: 1 samples beyond"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestWriteTableSections(t *testing.T) {
	rs := sampleResults(t)
	var lat, bw strings.Builder
	WriteTable(&lat, rs[:2])
	WriteTable(&bw, rs[2:])
	if !strings.HasPrefix(lat.String(), "Latency") || strings.Contains(lat.String(), "Bandwidth") {
		t.Errorf("latency-only table:\n%s", lat.String())
	}
	if !strings.HasPrefix(bw.String(), "Bandwidth") || strings.Contains(bw.String(), "Latency") {
		t.Errorf("bandwidth-only table:\n%s", bw.String())
	}
	var empty strings.Builder
	if err := WriteTable(&empty, nil); err != nil || empty.Len() != 0 {
		t.Errorf("empty table %q, %v", empty.String(), err)
	}
}

func TestProgressSilentOffTerminal(t *testing.T) {
	var sb strings.Builder
	p := NewProgress(&sb)
	p.Update("size %d", 8)
	p.Clear()
	if p.Enabled() || sb.Len() != 0 {
		t.Errorf("progress drew %q on a strings.Builder", sb.String())
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p = NewProgress(f)
	p.Update("size %d", 8)
	if fi, _ := f.Stat(); p.Enabled() || fi.Size() != 0 {
		t.Errorf("progress drew on a regular file")
	}
}

func TestProgressDraws(t *testing.T) {
	var sb strings.Builder
	p := &Progress{w: &sb, on: true} // as on a terminal, no rate limit
	p.Update("write-lat %s", "8 B")
	p.Update("bw %d", 1)
	p.Clear()
	want := "\rwrite-lat 8 B\rwrite-lat 8 B" + "\rbw 1" + strings.Repeat(" ", 9) + "\rbw 1" + "\r    \r"
	if sb.String() != want {
		t.Errorf("drew %q, want %q", sb.String(), want)
	}
	sb.Reset()
	p.Update("%s", strings.Repeat("x", 200))
	if n := len(strings.TrimRight(strings.Split(sb.String(), "\r")[1], " ")); n != maxProgress {
		t.Errorf("a long line drew %d characters, want %d", n, maxProgress)
	}
	// Within the redraw interval, updates are dropped.
	sb.Reset()
	p.interval = time.Hour
	p.Update("a")
	p.Update("b")
	if strings.Contains(sb.String(), "b") {
		t.Errorf("rate limit ignored: %q", sb.String())
	}
}

func TestProgressCharDevice(t *testing.T) {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	if !NewProgress(f).Enabled() {
		t.Errorf("%s is a character device; progress should draw there", os.DevNull)
	}
}
