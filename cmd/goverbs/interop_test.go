package main

import "testing"

// The interop commands complete SENDs and WRITEs locally by default: the
// remote-completion probe (a zero-length RDMA READ) is what Linux siw 6.1
// may answer with a stale, non-empty Read Response (docs/interop.md §1.9),
// which broke goverbs rping -c against rping -s in the lab.
func TestInteropCommandsCompleteLocallyByDefault(t *testing.T) {
	r := newRpingFlags()
	if err := r.fs.Parse([]string{"-c", "-a", "10.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if !r.dev.local {
		t.Error("goverbs rping: -local-completion is off by default")
	}
	p := newPerftestFlags()
	if err := p.fs.Parse([]string{"--test", "write_lat", "--connect", "10.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if !p.iwarp.local {
		t.Error("goverbs bench --perftest: -local-completion is off by default")
	}
}
