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
				try, wc.Status, after-base, size, nonZero(qa.Counters()), nonZero(qb.Counters()))
		}
		if end := counterMap(qb.Counters())["tx_bytes"]; end != after {
			t.Fatalf("try %d: %d bytes of the region sent after Deregister returned", try, end-after)
		}
		qa.Close()
		qb.Close()
	}
	t.Logf("%d tries: %d READs completed, %d refused before they started", tries, ok, refused)
}

// waitOne waits for one completion on cq.
func waitOne(ctx context.Context, cq *verbs.CQ) (verbs.WorkCompletion, error) {
	wcs := make([]verbs.WorkCompletion, 1)
	for {
		if n, _ := cq.Poll(wcs); n == 1 {
			return wcs[0], nil
		}
		if err := cq.Wait(ctx); err != nil && ctx.Err() != nil {
			return verbs.WorkCompletion{}, ctx.Err()
		}
	}
}
