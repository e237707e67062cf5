//go:build linux

package shm_test

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// fdsPerConn is what a connection's two ends hold, with room to spare:
// idle, one socket each (doorbells travel on it; each end's segment
// descriptor lives only while it is sent and mapped; each peer process's
// pidfd is the link's, shared by its connections).
const fdsPerConn = 3

// TestScale connects many QPs in one process (both ends here), makes each
// exchange a SEND each way and four more, and holds the idle cost of a QP
// to the bounds docs/scale.md gives. CI runs 500 connections;
// GOVERBS_SCALE_QPS=5000 gives the 10,000 QPs, about 10,000
// descriptors. Where the hard RLIMIT_NOFILE is lower than the test needs,
// a process with CAP_SYS_RESOURCE raises it; others skip.
func TestScale(t *testing.T) {
	raiseHardNoFile(t, fdsPerConn*uint64(conformance.ScaleConns(500))+1024)
	open := func() *verbs.Device { return testkit.Open(t, shm.New(shm.Options{})) }
	conformance.ScaleTest(t, open, 500, fdsPerConn, "", conformance.ScaleBounds{HeapPerQP: 98304, GoroutinesPerQP: 2.1, FDsPerQP: 1.1})
}

// raiseHardNoFile raises the hard RLIMIT_NOFILE to want where it is lower
// and the process may (CAP_SYS_RESOURCE); ScaleTest raises the soft limit
// to it, or skips. The limit is restored when the test ends.
func raiseHardNoFile(t *testing.T, want uint64) {
	var r unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &r) != nil || r.Max >= want {
		return
	}
	old := r
	r.Max = want
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		t.Logf("hard RLIMIT_NOFILE %d stays: %v", old.Max, err)
		return
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &old) })
}
