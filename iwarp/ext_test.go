package iwarp_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// The goverbs extensions to RFC 5040: what they need of the peer, local
// completion, and the Final and Placed notices.

// TestExtensionsNeedBothPeers: against a peer that announces no goverbs
// extensions (as Linux siw, here a goverbs device with the capability block
// off), RFC 5040 operations work and every extension opcode fails locally
// with LOC_QP_OP_ERR, a vendor code naming the missing feature, and an
// EventQPFatal wrapping ErrExtensionNotNegotiated.
func TestExtensionsNeedBothPeers(t *testing.T) {
	cases := []struct {
		op   verbs.Opcode
		need iw.Features
	}{
		{verbs.OpCompareSwap, iw.FeatureAtomics}, {verbs.OpFetchAdd, iw.FeatureAtomics},
		{verbs.OpSendWithImm, iw.FeatureImmediate}, {verbs.OpWriteWithImm, iw.FeatureImmediate},
		{verbs.OpFlush, iw.FeatureFlush}, {verbs.OpAtomicWrite, iw.FeatureAtomicWrite},
	}
	strict := openDev(t, iwarp.CapabilityBlock(false))
	if got, want := strict.Caps().MaxPrivateData, 252; got != want {
		t.Errorf("MaxPrivateData without the blocks: %d, want %d", got, want)
	}
	for _, tc := range cases {
		t.Run(tc.op.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a := openDev(t)
			p := connectDevs(t, a, strict)
			src := must(p.pa.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite))
			dst := must(p.pb.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead))
			// Plain RDMA works.
			p.qa.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote().At(0)}})
			if wc := testkit.PollOne(t, ctx, p.cqa); wc.Status != verbs.StatusSuccess {
				t.Fatalf("READ against a peer without extensions: %v", wc.Status)
			}
			wr := verbs.SendWR{ID: 2, Opcode: tc.op, Flags: verbs.SendSignaled, Remote: dst.Remote().At(8), Flush: verbs.FlushGlobal}
			if tc.op.IsAtomic() || tc.op == verbs.OpSendWithImm || tc.op == verbs.OpWriteWithImm {
				wr.SGL = []verbs.SGE{src.SGE(0, 8)}
			}
			if err := p.qa.PostSend([]verbs.SendWR{wr}); err != nil {
				t.Fatal(err)
			}
			wc := testkit.PollOne(t, ctx, p.cqa)
			if wc.Status != verbs.StatusLocQPOpErr || wc.VendorErr != iwarp.VendorNotNegotiated|uint32(tc.need) {
				t.Fatalf("%v against a peer without extensions: %v vendor %#x, want %v vendor %#x",
					tc.op, wc.Status, wc.VendorErr, verbs.StatusLocQPOpErr, iwarp.VendorNotNegotiated|uint32(tc.need))
			}
			waitState(t, p.qa, verbs.StateErr)
			for {
				select {
				case ev := <-a.Events():
					if ev.Type == verbs.EventQPFatal && errors.Is(ev.Err, iwarp.ErrExtensionNotNegotiated) {
						return
					}
				case <-ctx.Done():
					t.Fatal("no EventQPFatal naming the missing extension")
				}
			}
		})
	}
}

// TestLocalCompletion: with LocalCompletion a WRITE completes when handed
// to TCP, and a refused one moves the QP to ERR with an event carrying the
// peer's Terminate.
func TestLocalCompletion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, b := openDev(t, iwarp.LocalCompletion(true)), openDev(t)
	if c := a.Caps().WriteCompletion; c != verbs.CompletionLocal {
		t.Fatalf("Caps.WriteCompletion %v", c)
	}
	p := connectDevs(t, a, b)
	src := must(p.pa.RegisterMR([]byte("local!!!"), verbs.AccessLocalWrite))
	dst := must(p.pb.RegisterMR(make([]byte, 8), verbs.AccessLocalWrite|verbs.AccessRemoteWrite))
	p.qa.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote().At(0)}})
	if wc := testkit.PollOne(t, ctx, p.cqa); wc.Status != verbs.StatusSuccess {
		t.Fatal(wc.Status)
	}
	if n := counter(p.qa, "probes"); n != 0 {
		t.Errorf("%d probes sent with local completion", n)
	}
	bad := dst.Remote().At(0)
	bad.RKey ^= 1
	p.qa.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: bad}})
	waitState(t, p.qa, verbs.StateErr)
	for {
		select {
		case ev := <-a.Events():
			var te *iwarp.TerminateError
			if errors.As(ev.Err, &te) && te.Remote && te.Status() == verbs.StatusRemAccessErr {
				return
			}
		case <-ctx.Done():
			t.Fatal("no event carrying the peer's Terminate")
		}
	}
}

func counter(qp *verbs.QP, name string) uint64 {
	for _, c := range qp.Counters() {
		if c.Name == name {
			return c.Value
		}
	}
	return 0
}

// The Final notice (SEMANTICS 16a): a goverbs endpoint that ends its
// stream on purpose tells a peer that announced the extension how much of
// the peer's stream it handled, so that a WR it placed completes with
// SUCCESS although the probe that would confirm it is never answered.

// readFPDU reads one FPDU (no CRC) and returns its ULPDU and its length on
// the wire.
func readFPDU(c net.Conn) ([]byte, int, error) {
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return nil, 0, err
	}
	n := int(binary.BigEndian.Uint16(l[:]))
	rest := make([]byte, iw.FPDULen(n)-2)
	if _, err := io.ReadFull(c, rest); err != nil {
		return nil, 0, err
	}
	return rest[:n], iw.FPDULen(n), nil
}

// isFinalNotice reports whether u is a Final notice and returns its count.
func isFinalNotice(u []byte) (uint64, bool) {
	if len(u) != iw.DDPUntaggedHeaderSize+8 || iw.DDPControl(u[0]).Tagged() ||
		iw.RDMAPControl(u[1]).Opcode() != iwarp.OpFinal || iw.DDPUntagged(u).QN() != iw.QNTerminate {
		return 0, false
	}
	return binary.BigEndian.Uint64(u[iw.DDPUntaggedHeaderSize:]), true
}

// scriptedResponder accepts one connection, answers its MPA Request
// announcing features, reads the initiator's FPDUs up to the first Read
// Request (the probe that follows a signalled SEND) without answering it,
// and ends the stream with end(c, sendEnd, rtrEnd): the stream offsets
// just past the SEND and past the RTR.
func scriptedResponder(t *testing.T, features iw.Features, end func(c net.Conn, sendEnd, rtrEnd uint64)) string {
	ln := must(net.Listen("tcp", "127.0.0.1:0"))
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if answerRequest(c, features) != nil {
			return
		}
		var off, sendEnd, rtrEnd uint64
		for {
			u, n, err := readFPDU(c)
			if err != nil {
				return
			}
			off += uint64(n)
			op := iw.RDMAPControl(u[1]).Opcode()
			switch {
			case op == iw.OpWrite && rtrEnd == 0:
				rtrEnd = off
			case op == iw.OpSend:
				sendEnd = off
			case op == iw.OpReadRequest:
				end(c, sendEnd, rtrEnd)
				c.(*net.TCPConn).CloseWrite()
				io.Copy(io.Discard, c)
				return
			}
		}
	}()
	return ln.Addr().String()
}

// answerRequest is a scripted responder's MPA exchange: it reads the
// initiator's Request and answers with an enhanced Reply announcing IRD
// and ORD 4 and the extensions in features. The connection's deadline is
// 10 s from now.
func answerRequest(c net.Conn, features iw.Features) error {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	hdr := make([]byte, iw.MPAHeaderSize)
	if _, err := io.ReadFull(c, hdr); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, make([]byte, binary.BigEndian.Uint16(hdr[18:]))); err != nil {
		return err
	}
	pd, _ := (&iw.PrivateDataFields{IRDORD: &iw.IRDORDFields{IRD: 4, ORD: 4}, Caps: true, Features: features}).Append(nil)
	_, err := c.Write(reply(iw.MPAEnhanced, 2, pd))
	return err
}

// notice is the FPDU of a goverbs Final or Placed notice (op) that says
// placed bytes of the stream were handled.
func notice(op iw.Opcode, placed uint64) []byte {
	u := make([]byte, iw.DDPUntaggedHeaderSize+8)
	iw.DDPUntagged(u).Encode(&iw.DDPUntaggedFields{Last: true, Opcode: op, QN: iw.QNTerminate, MSN: 1})
	binary.BigEndian.PutUint64(u[iw.DDPUntaggedHeaderSize:], placed)
	h := &hostile{}
	return h.fpdu(u)
}

// TestFinalNoticeConfirms: a goverbs requester completes its SEND by the
// peer's Final notice alone (the probe stays unanswered): SUCCESS when the
// notice covers it, WR_FLUSH_ERR when it does not; and a peer that did not
// announce the extension and closes gets the old answer, RETRY_EXC_ERR.
func TestFinalNoticeConfirms(t *testing.T) {
	cases := []struct {
		name     string
		features iw.Features
		end      func(c net.Conn, sendEnd, rtrEnd uint64)
		want     verbs.Status
	}{
		{"covered", iwarp.FeatureFinal, func(c net.Conn, s, _ uint64) { c.Write(notice(iwarp.OpFinal, s)) }, verbs.StatusSuccess},
		{"not covered", iwarp.FeatureFinal, func(c net.Conn, _, r uint64) { c.Write(notice(iwarp.OpFinal, r)) }, verbs.StatusWRFlushErr},
		{"not announced", 0, func(net.Conn, uint64, uint64) {}, verbs.StatusRetryExcErr},
	}
	d := openDev(t)
	pd := must(d.AllocPD())
	src := must(pd.RegisterMR([]byte("done"), verbs.AccessLocalWrite))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := scriptedResponder(t, tc.features, tc.end)
			qp, cq := newQP(t, d, pd)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := d.Dial(ctx, addr, qp, verbs.ConnParam{}); err != nil {
				t.Fatal(err)
			}
			if err := qp.PostSend([]verbs.SendWR{{ID: 7, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{src.SGE(0, 4)}}}); err != nil {
				t.Fatal(err)
			}
			if wc := testkit.PollOne(t, ctx, cq); wc.ID != 7 || wc.Status != tc.want {
				t.Fatalf("SEND completed %+v (%v), want %v", wc, wc.Status, tc.want)
			}
			waitState(t, qp, verbs.StateErr)
			qp.Close()
			cq.Close()
		})
	}
}

// TestFinalNoticeSent: a goverbs responder whose QP is closed right after
// it completed a receive ends its stream with a Final notice counting
// exactly the FPDUs it handled (not the one cut short after them), when
// the requester announced the extension, and with a bare FIN otherwise.
func TestFinalNoticeSent(t *testing.T) {
	for _, announce := range []bool{true, false} {
		name := map[bool]string{true: "announced", false: "not announced"}[announce]
		t.Run(name, func(t *testing.T) {
			v := newVictim(t)
			features := iw.FeatureAtomics | iw.FeatureImmediate
			if announce {
				features |= iwarp.FeatureFinal
			}
			h := dialHostileWith(t, v.ln.Addr(), false, true, features)
			send := h.fpdu(untagged(iw.OpSend, iw.QNSend, 1, 0, []byte("done")))
			h.send(send)
			waitFor(t, func() bool { return len(v.qpsSnapshot()) == 1 })
			qp := v.qpsSnapshot()[0]
			v.mu.Lock()
			cq := v.cqs[qp]
			v.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if wc := testkit.PollOne(t, ctx, cq); wc.Status != verbs.StatusSuccess || wc.ByteLen != 4 {
				t.Fatalf("receive completed %+v (%v)", wc, wc.Status)
			}
			// Half of a second SEND: never handled, never counted.
			next := h.fpdu(untagged(iw.OpSend, iw.QNSend, 2, 0, []byte("more")))
			h.send(next[:len(next)/2])
			qp.Close()
			var notices []uint64
			for {
				u, _, err := readFPDU(h.c)
				if err != nil {
					if !errors.Is(err, io.EOF) && !isReset(err) {
						t.Fatalf("reading the responder's stream: %v", err)
					}
					break
				}
				placed, ok := isFinalNotice(u)
				if !ok {
					t.Fatalf("unexpected FPDU %x", u)
				}
				notices = append(notices, placed)
			}
			switch {
			case announce && (len(notices) != 1 || notices[0] != uint64(len(send))):
				t.Fatalf("Final notices %v, want one counting %d bytes", notices, len(send))
			case !announce && len(notices) != 0:
				t.Fatalf("Final notices %v to a peer that did not announce the extension", notices)
			}
		})
	}
}

// The Placed notice (featurePlaced): a receiver confirms the messages that
// consumed its receives before it completes them, and the sender needs no
// probe for them.

// TestPlacedNoticeConfirmsWithoutProbe: against a peer that announced the
// Placed notice, a signalled SEND goes out with no probe behind it and
// completes with SUCCESS on the peer's notice alone, the connection
// staying up; no Read Request follows while the QP idles.
func TestPlacedNoticeConfirmsWithoutProbe(t *testing.T) {
	ln := must(net.Listen("tcp", "127.0.0.1:0"))
	reads := make(chan int, 1) // Read Requests the scripted peer saw
	release := make(chan struct{})
	t.Cleanup(func() { ln.Close() })
	go func() {
		n := -1
		defer func() { reads <- n }()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if answerRequest(c, iwarp.FeatureFinal|iwarp.FeaturePlaced) != nil {
			return
		}
		var off uint64
		n = 0
		noticed := false
		for {
			if noticed {
				// Long enough for the idle probe timer (1 ms) to fire
				// many times over.
				c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			}
			u, l, err := readFPDU(c)
			if err != nil {
				<-release
				return
			}
			off += uint64(l)
			switch iw.RDMAPControl(u[1]).Opcode() {
			case iw.OpReadRequest:
				n++
			case iw.OpSend:
				c.Write(notice(iwarp.OpPlaced, off))
				noticed = true
			}
		}
	}()
	d := openDev(t)
	pd := must(d.AllocPD())
	src := must(pd.RegisterMR([]byte("done"), verbs.AccessLocalWrite))
	qp, cq := newQP(t, d, pd)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.Dial(ctx, ln.Addr().String(), qp, verbs.ConnParam{}); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend([]verbs.SendWR{{ID: 7, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{src.SGE(0, 4)}}}); err != nil {
		t.Fatal(err)
	}
	if wc := testkit.PollOne(t, ctx, cq); wc.ID != 7 || wc.Status != verbs.StatusSuccess {
		t.Fatalf("SEND completed %+v (%v), want SUCCESS", wc, wc.Status)
	}
	if st := qp.State(); st != verbs.StateRTS {
		t.Fatalf("QP in %v after the Placed notice, want RTS", st)
	}
	close(release)
	if n := <-reads; n != 0 {
		t.Fatalf("%d Read Requests (probes) went to a peer that confirms SENDs with Placed notices", n)
	}
}

// TestPlacedNoticesBatchAndReplaceProbes: between two goverbs devices, a
// WRITE and a run of signalled SENDs posted at once all complete with
// SUCCESS, confirmed by the receiver's Placed notices alone (no probe),
// and the receives handled in one pass share a notice: never more notices
// than receives.
func TestPlacedNoticesBatchAndReplaceProbes(t *testing.T) {
	const n = 16
	p, src, dst := pairWithRecvs(t, n, 64)
	wrs := []verbs.SendWR{{ID: 100, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote().At(0)}}
	for i := range n {
		wrs = append(wrs, verbs.SendWR{ID: uint64(i), Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{src.SGE(0, 8)}})
	}
	if err := p.qa.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range n {
		if wc := testkit.PollOne(t, ctx, p.cqa); wc.ID != uint64(i) || wc.Status != verbs.StatusSuccess {
			t.Fatalf("SEND %d completed %+v (%v)", i, wc, wc.Status)
		}
		if wc := testkit.PollOne(t, ctx, p.cqb); wc.ID != uint64(i) || wc.Status != verbs.StatusSuccess {
			t.Fatalf("receive %d completed %+v (%v)", i, wc, wc.Status)
		}
	}
	probes, sent := counter(p.qa, "probes"), counter(p.qb, "placed_notices_sent")
	t.Logf("%d SENDs: %d probes, %d Placed notices", n, probes, sent)
	switch {
	case probes != 0:
		t.Errorf("%d probes for WRs that Placed notices confirm", probes)
	case sent == 0 || sent > n:
		t.Errorf("%d Placed notices for %d receives", sent, n)
	}
}

// TestSignaledWriteThenSendNeedsNoProbe: a stream's pattern in rsocket's
// iWARP mode, every WR signalled, each WRITE followed by the SEND of its
// message word. The SEND's Placed notice confirms the WRITE before it, so
// no probe goes out between them; every WR still completes with SUCCESS,
// in order.
func TestSignaledWriteThenSendNeedsNoProbe(t *testing.T) {
	const n = 16
	p, src, dst := pairWithRecvs(t, n, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range n {
		wrs := []verbs.SendWR{
			{ID: uint64(2 * i), Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 32)}, Remote: dst.Remote().At(uint64(64*i + 32))},
			{ID: uint64(2*i + 1), Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(32, 4)}},
		}
		if err := p.qa.PostSend(wrs); err != nil {
			t.Fatal(err)
		}
		for j := range 2 {
			if wc := testkit.PollOne(t, ctx, p.cqa); wc.ID != uint64(2*i+j) || wc.Status != verbs.StatusSuccess {
				t.Fatalf("WR %d completed %+v (%v)", 2*i+j, wc, wc.Status)
			}
		}
		if wc := testkit.PollOne(t, ctx, p.cqb); wc.ID != uint64(i) || wc.Status != verbs.StatusSuccess {
			t.Fatalf("receive %d completed %+v (%v)", i, wc, wc.Status)
		}
	}
	if probes := counter(p.qa, "probes"); probes != 0 {
		t.Errorf("%d probes for %d signalled WRITEs that the next SEND's Placed notice confirms", probes, n)
	}
}

// pairWithRecvs connects a pair, registers 64 bytes to send from on A and
// n 64-byte slots on B (remote-writable), and posts n receives on B, the
// i-th into the first recvLen bytes of slot i.
func pairWithRecvs(t *testing.T, n, recvLen int) (p *pair, src, dst *verbs.MR) {
	p = newPair(t)
	src = must(p.pa.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite))
	dst = must(p.pb.RegisterMR(make([]byte, 64*n), verbs.AccessLocalWrite|verbs.AccessRemoteWrite))
	recvs := make([]verbs.RecvWR, n)
	for i := range recvs {
		recvs[i] = verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{dst.SGE(64*i, recvLen)}}
	}
	if err := p.qb.PostRecv(recvs); err != nil {
		t.Fatal(err)
	}
	return p, src, dst
}
