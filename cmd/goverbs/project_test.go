package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/bench/report"
)

// TestProject checks the example: 80 ms of compute and 20 ms of
// transfer, the transfer twice as fast: 90 ms, 1.11×, ceiling 1.25×.
func TestProject(t *testing.T) {
	code, out, errs := goverbs(t, "bench", "project", "--compute", "80ms", "--transfer", "20ms", "--speedup", "2")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	wantOutput(t, out, "100 ms", "90 ms", "1.11×", "1.25×")
}

func TestProjectFromRuns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	jw := report.NewJSONWriter(f)
	jw.Write(report.NewBandwidth("write-bw", "loopback", 65536, 4000, time.Second))
	jw.Write(report.NewBandwidth("tcp-bw", "tcp", 65536, 1000, time.Second))
	f.Close()
	code, out, errs := goverbs(t, "bench", "project", "--compute", "80ms", "--transfer", "20ms", "--rdma", path, "--socket", path)
	if code != exitOK || !strings.Contains(out, "4×") || !strings.Contains(out, "85 ms") {
		t.Errorf("exit %d:\n%s%s", code, out, errs)
	}
}

func TestProjectUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--compute", "80ms", "--transfer", "20ms"},
		{"--compute", "80ms", "--transfer", "20ms", "--speedup", "0"},
		{"--compute", "80ms", "--transfer", "20ms", "--speedup", "2", "--rdma", "x"},
		{"--compute", "-1ms", "--transfer", "20ms", "--speedup", "2"},
		{"--compute", "80ms", "--transfer", "20ms", "--rdma", "x"},
	} {
		if code, _, errs := goverbs(t, append([]string{"bench", "project"}, args...)...); code != exitUsage {
			t.Errorf("%q: exit %d (%s), want %d", args, code, errs, exitUsage)
		}
	}
}
