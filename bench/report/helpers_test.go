package report

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/goverbs/goverbs/bench/stats"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// sampleResults returns a fixed set of results covering every optional
// part: latency with and without remote CPU, bandwidth with a baseline.
func sampleResults(t testing.TB) []Result {
	t.Helper()
	iwarp := stats.NewRecorder(4, stats.RoundTrip)
	for _, rtt := range []int64{6000, 6200, 7000, 9001} {
		iwarp.Record(rtt)
	}
	tcp := stats.NewRecorder(2, stats.RoundTrip)
	for _, rtt := range []int64{30000, 31000, 33000} {
		tcp.Record(rtt) // one past the pre-allocation
	}
	lat := NewLatency("write-lat", "iwarp", 8, iwarp)
	lat.Placement, lat.QPs, lat.Threads = "same-host", 1, 1
	lat.RemoteCPUNote = "software transport: the remote adapter is the remote CPU"
	lat.SetCPU(stats.CPUTimes{User: 30 * time.Millisecond, System: 10 * time.Millisecond},
		&stats.CPUTimes{User: 20 * time.Millisecond, System: 5 * time.Millisecond})
	base := NewLatency("tcp-lat", "tcp", 8, tcp)
	base.Histogram = nil
	base.SetCPU(stats.CPUTimes{User: 40 * time.Millisecond}, nil)
	if err := lat.CompareTo(base); err != nil {
		t.Fatal(err)
	}
	bw := NewBandwidth("write-bw", "iwarp", 64<<10, 20000, 2*time.Second)
	tcpBW := NewBandwidth("tcp-bw", "tcp", 64<<10, 16000, 2*time.Second)
	if err := bw.CompareTo(tcpBW); err != nil {
		t.Fatal(err)
	}
	bw.SetCPU(stats.CPUTimes{User: time.Second, System: 500 * time.Millisecond},
		&stats.CPUTimes{User: 1200 * time.Millisecond, System: 300 * time.Millisecond})
	return []Result{lat, base, bw, tcpBW}
}
