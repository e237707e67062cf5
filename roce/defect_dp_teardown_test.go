package roce_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// Issue 11's data-path defects at teardown: what a peer still has in
// flight when the owner deregisters a region, closes its QP or exits.

// TestDeregisterWaitsForPeerRead races the owner's Deregister against a
// peer's multi-MiB READ of the region (issue 11 item 2: Deregister
// returned at once and the READ failed with REM_ACCESS_ERR after part of
// the data arrived). verbs.MR.Deregister waits for peer accesses under
// way: a READ the owner had started to answer when Deregister was called
// completes with every byte right; one it had not is refused whole
// (REM_ACCESS_ERR) or completes; after Deregister returns the owner sends
// no byte of the region. GOVERBS_DEREG_TRIES sets the number of tries.
func TestDeregisterWaitsForPeerRead(t *testing.T) {
	tries := testkit.EnvInt("GOVERBS_DEREG_TRIES", 6)
	const size = 8 << 20
	// A 4x longer ACK timeout than the default (268 ms): the test is about
	// Deregister, and on a loaded 2-CPU machine an 8 MiB READ under the
	// default 67 ms sometimes ran out of retries before Deregister mattered.
	opts := roce.Options{AckTimeout: 16}
	a := openDevice(t, opts)
	b := openDevice(t, opts)
	defer b.Close()
	defer a.Close()
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i*131 + i>>12)
	}
	var ok, refused int
	for try := range tries {
		qa, qb, pda, pdb, cqa, _ := connectPair(t, a, b)
		owned := mustMR(t, pdb, size, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
		copy(owned.Bytes(), src)
		dst := mustMR(t, pda, size, verbs.AccessLocalWrite)
		base := counterMap(qb.Counters())["tx_bytes"]
		if err := qa.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{dst.SGE(0, size)}, Remote: owned.Remote().At(0)}}); err != nil {
			t.Fatal(err)
		}
		// Deregister at a different point of the stream each try: before
		// the request arrives, as it starts, in the middle.
		deadline := time.Now().Add(time.Duration(try%4) * 150 * time.Microsecond)
		for time.Now().Before(deadline) {
		}
		started := counterMap(qb.Counters())["tx_bytes"] > base
		if err := owned.Deregister(); err != nil {
			t.Fatal(err)
		}
		after := counterMap(qb.Counters())["tx_bytes"]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		wc, err := waitOne(ctx, cqa)
		cancel()
		if err != nil {
			t.Fatalf("try %d: READ did not complete: %v", try, err)
		}
		switch {
		case wc.Status == verbs.StatusSuccess:
			if !bytes.Equal(dst.Bytes(), src) {
				t.Fatalf("try %d: READ succeeded with wrong bytes", try)
			}
			ok++
		case wc.Status == verbs.StatusRemAccessErr && !started:
			refused++
		default:
			t.Fatalf("try %d: READ started before Deregister ended with %v (%d of %d bytes sent before Deregister returned)\nA %v\nB %v",
				try, wc.Status, after-base, size, testkit.NonZero(qa.Counters()), testkit.NonZero(qb.Counters()))
		}
		if end := counterMap(qb.Counters())["tx_bytes"]; end != after {
			t.Fatalf("try %d: %d bytes of the region sent after Deregister returned", try, end-after)
		}
		qa.Close()
		qb.Close()
	}
	t.Logf("%d tries: %d READs completed, %d refused before they started", tries, ok, refused)
}

// TestLastSendAcknowledgedBeforeClose is the commonest shutdown: the client
// SENDs "done", the server polls the receive and closes its QP at once
// (issue 11 item 3: the client's SEND then completed with WR_FLUSH_ERR in
// 4 of 10 runs although the server had it). The responder acknowledges
// what it placed before it tells the peer the connection ends, and the
// requester takes what already arrived before it flushes. The SEND must
// complete successfully every time. GOVERBS_LASTSEND_TRIES sets the number
// of tries.
func TestLastSendAcknowledgedBeforeClose(t *testing.T) {
	tries := testkit.EnvInt("GOVERBS_LASTSEND_TRIES", 20)
	a := openDevice(t, roce.Options{})
	b := openDevice(t, roce.Options{})
	defer b.Close()
	defer a.Close()
	bad := 0
	for try := range tries {
		qa, qb, pda, pdb, cqa, cqb := connectPair(t, a, b)
		msg := mustMR(t, pda, 64, verbs.AccessLocalWrite)
		copy(msg.Bytes(), "done")
		recv := mustMR(t, pdb, 64, verbs.AccessLocalWrite)
		if err := qb.PostRecv([]verbs.RecvWR{{ID: 7, SGL: []verbs.SGE{recv.SGE(0, 64)}}}); err != nil {
			t.Fatal(err)
		}
		if err := qa.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{msg.SGE(0, 4)}}}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if wc, err := waitOne(ctx, cqb); err != nil || wc.Status != verbs.StatusSuccess || string(recv.Bytes()[:4]) != "done" {
			t.Fatalf("try %d: receive %+v %v", try, wc, err)
		}
		qb.Close() // at once, as a server that got its last message does
		wc, err := waitOne(ctx, cqa)
		cancel()
		if err != nil {
			t.Fatalf("try %d: no send completion: %v", try, err)
		}
		if wc.Status != verbs.StatusSuccess {
			bad++
			t.Errorf("try %d: delivered SEND completed with %v\nA %v", try, wc.Status, testkit.NonZero(qa.Counters()))
		}
		qa.Close()
	}
	t.Logf("%d tries, %d delivered SENDs reported failed", tries, bad)
}

// maybeServeExitPeer runs this test binary as the exiting server of
// TestLastSendAcknowledgedBeforeExit when it was started as one.
func maybeServeExitPeer() {
	testkit.ServeExitPeer(func() (*verbs.Device, error) {
		return verbs.Open(roce.New(roce.Options{Addr: "127.0.0.1:0"}))
	})
}

// TestLastSendAcknowledgedBeforeExit: a server process that polls the
// receive of the client's SEND and exits at once, closing nothing, runs
// nothing after the poll that could still send the ACK; the responder
// must have handed it to the socket before the receive completion could be
// polled, so the client's SEND completes with SUCCESS every time (issue 11
// item 3). GOVERBS_LASTSEND_EXIT_TRIES sets the number of tries.
func TestLastSendAcknowledgedBeforeExit(t *testing.T) {
	a := openDevice(t, roce.Options{})
	defer a.Close()
	testkit.LastSendBeforeExit(t, a, 20)
}
