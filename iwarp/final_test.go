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
