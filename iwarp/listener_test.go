package iwarp_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// envTries is the number of tries a by-hand run asks for in the
// environment variable name, or def.
func envTries(t *testing.T, name string, def int) int {
	if s := os.Getenv(name); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive count", name, s)
		}
		return n
	}
	return def
}

// TestListenerCloseAfterAccept closes the listener as soon as Dial and
// Accept have returned, then uses the new connection both ways: a
// connection the listener handed to Accept belongs to its QP, and the
// listener's Close must not touch it (issue 11 item 4). By hand:
// GOVERBS_CLOSE_TRIES=10000 go test -run TestListenerCloseAfterAccept ./iwarp/
func TestListenerCloseAfterAccept(t *testing.T) {
	tries := envTries(t, "GOVERBS_CLOSE_TRIES", 300)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, b := openDev(t), openDev(t)
	pa, pb := must(a.AllocPD()), must(b.AllocPD())
	rights := verbs.AccessLocalWrite | verbs.AccessRemoteWrite
	ma := must(pa.RegisterMR(make([]byte, 64), rights))
	mb := must(pb.RegisterMR(make([]byte, 64), rights))
	failed := 0
	for i := range tries {
		qa, cqa := newQP(t, a, pa)
		qb, cqb := newQP(t, b, pb)
		for _, qp := range []*verbs.QP{qa, qb} {
			if err := qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessRemoteWrite}, verbs.AttrState|verbs.AttrAccessFlags); err != nil {
				t.Fatal(err)
			}
		}
		ln := must(b.Listen("127.0.0.1:0"))
		accepted := make(chan error, 1)
		go func() {
			req, err := ln.Accept(ctx)
			if err == nil {
				_, err = req.Accept(ctx, qb, verbs.ConnParam{})
			}
			accepted <- err
		}()
		_, err := a.Dial(ctx, ln.Addr(), qa, verbs.ConnParam{})
		if aerr := <-accepted; err == nil {
			err = aerr
		}
		if err != nil {
			t.Fatalf("try %d: connecting: %v", i, err)
		}
		ln.Close()
		// The initiator speaks first (RFC 5044 §7.1.1), then the responder.
		for _, side := range []struct {
			qp       *verbs.QP
			cq       *verbs.CQ
			src, dst *verbs.MR
		}{{qa, cqa, ma, mb}, {qb, cqb, mb, ma}} {
			side.qp.PostSend([]verbs.SendWR{{ID: uint64(i), Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{side.src.SGE(0, 8)}, Remote: side.dst.Remote().At(8)}})
			if wc := pollOne(t, ctx, side.cq); wc.Status != verbs.StatusSuccess {
				failed++
				t.Errorf("try %d: the first WRITE after the listener closed: %v", i, wc.Status)
				break
			}
		}
		qa.Close()
		qb.Close()
		cqa.Close()
		cqb.Close()
		if failed > 5 {
			t.Fatalf("stopped after %d failures in %d tries", failed, i+1)
		}
	}
	t.Logf("%d tries, %d failures", tries, failed)
}
