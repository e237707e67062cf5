package iwarp_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// TestDisconnectBehindRNRWait: a SEND that waits at the peer for a receive
// (the RNR rule) does not hide the sender's disconnect behind it: the
// peer's QP moves to ERR with EventPeerDisconnected at once, not when its
// RNR budget runs out with EventQPRequestErr; the waiting SEND flushes at
// the sender. A SEND read whole and one streamed from the socket (larger
// than an FPDU read whole) alike. Not a SEND larger than the receive
// buffer and the socket hold: TCP's flow control then keeps the FIN at the
// sender (the package doc says so), and the wait ends by its budget, as
// CI showed for 1 MiB in one run of three.
func TestDisconnectBehindRNRWait(t *testing.T) {
	ends := []struct {
		name string
		end  func(a *verbs.Device, qa *verbs.QP)
	}{
		{"Disconnect", func(_ *verbs.Device, qa *verbs.QP) { qa.Disconnect() }},
		{"QP.Close", func(_ *verbs.Device, qa *verbs.QP) { qa.Close() }},
		{"Device.Close", func(a *verbs.Device, _ *verbs.QP) { a.Close() }},
	}
	for _, size := range []int{4, 48 << 10} {
		for _, tc := range ends {
			t.Run(tc.name+"/"+strconv.Itoa(size), func(t *testing.T) {
				a := openDev(t, iwarp.RNRBudget(4*time.Second))
				b := openDev(t, iwarp.RNRBudget(4*time.Second))
				p := connectDevs(t, a, b)
				mr := must(p.pa.RegisterMR(make([]byte, size), verbs.AccessLocalWrite))
				// b has no receive posted: the SEND waits there.
				if err := p.qa.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
					SGL: []verbs.SGE{mr.SGE(0, size)}}}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond)
				if n := counter(p.qb, "rnr_waits"); n != 1 {
					t.Fatalf("rnr_waits %d, want 1", n)
				}
				tc.end(a, p.qa)
				st := time.Now()
				for p.qb.State() != verbs.StateErr && time.Since(st) < 10*time.Second {
					time.Sleep(time.Millisecond)
				}
				took := time.Since(st)
				var ev verbs.AsyncEvent
				select {
				case ev = <-b.Events():
				case <-time.After(10 * time.Second):
					t.Fatal("no event at the peer")
				}
				t.Logf("peer in ERR after %v: %v", took, ev.Err)
				if took > time.Second || ev.Type != verbs.EventPeerDisconnected {
					t.Errorf("peer in %v after %v with %v (%v), want ERR at once with %v",
						p.qb.State(), took, ev.Type, ev.Err, verbs.EventPeerDisconnected)
				}
				if n := counter(p.qb, "rnr_failures"); n != 0 {
					t.Errorf("rnr_failures %d, want 0", n)
				}
				if tc.name == "Disconnect" {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					var wc [1]verbs.WorkCompletion
					n, err := p.cqa.PollWait(ctx, wc[:])
					if err != nil || n != 1 || wc[0].ID != 1 || wc[0].Status != verbs.StatusWRFlushErr {
						t.Errorf("the waiting SEND: %v %v, want WR 1 with %v", wc[:n], err, verbs.StatusWRFlushErr)
					}
				}
			})
		}
	}
}

// TestRNRWaitReadsAhead: what the peer sends behind a SEND that waits for
// a receive (read into the buffer while the wait watches the stream) is
// handled in order once a receive takes the SEND.
func TestRNRWaitReadsAhead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := newPair(t, iwarp.RNRBudget(4*time.Second))
	src := must(p.pa.RegisterMR([]byte("0123456789abcdef"), verbs.AccessLocalWrite))
	rbuf := make([]byte, 16)
	rmr := must(p.pb.RegisterMR(rbuf, verbs.AccessLocalWrite))
	dbuf := make([]byte, 16)
	dst := must(p.pb.RegisterMR(dbuf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite))
	if err := p.qa.PostSend([]verbs.SendWR{
		{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}},
		{ID: 2, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(8, 8)}, Remote: dst.Remote().At(0)},
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the WRITE arrives behind the waiting SEND
	if err := p.qb.PostRecv([]verbs.RecvWR{{ID: 7, SGL: []verbs.SGE{rmr.SGE(0, 16)}}}); err != nil {
		t.Fatal(err)
	}
	var wc [2]verbs.WorkCompletion
	for got := 0; got < 2; {
		n, err := p.cqa.PollWait(ctx, wc[got:])
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	for i, c := range wc {
		if c.ID != uint64(i+1) || c.Status != verbs.StatusSuccess {
			t.Fatalf("sender's completions %v", wc)
		}
	}
	n, err := p.cqb.PollWait(ctx, wc[:1])
	if err != nil || n != 1 || wc[0].ID != 7 || wc[0].Status != verbs.StatusSuccess || wc[0].ByteLen != 8 {
		t.Fatalf("receive: %v %v", wc[:n], err)
	}
	if string(rbuf[:8]) != "01234567" || string(dbuf[:8]) != "89abcdef" {
		t.Fatalf("received %q, written %q", rbuf[:8], dbuf[:8])
	}
	if p.qa.State() != verbs.StateRTS || p.qb.State() != verbs.StateRTS {
		t.Fatalf("QPs in %v and %v", p.qa.State(), p.qb.State())
	}
}
