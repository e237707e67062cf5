package verbs_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/loopback"
	"github.com/goverbs/goverbs/verbs"
)

// The verbs error classes; every error the API returns must match one.
var sentinels = []error{
	verbs.ErrInvalidArgument, verbs.ErrInvalidState, verbs.ErrQueueFull, verbs.ErrTooManySGE,
	verbs.ErrInlineTooLong, verbs.ErrLimit, verbs.ErrBusy, verbs.ErrClosed, verbs.ErrNotSupported,
	verbs.ErrCQOverrun,
}

func typed(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// script reads fuzz input as a stream of small numbers.
type script struct{ b []byte }

func (s *script) next(n int) int {
	if len(s.b) == 0 || n <= 0 {
		return 0
	}
	v := int(s.b[0]) % n
	s.b = s.b[1:]
	return v
}

func (s *script) u64() uint64 {
	var v uint64
	for range 8 {
		v = v<<8 | uint64(s.next(256))
	}
	return v
}

// fuzzWorld is two connected QPs that signal every WR, regions with and
// without rights, and a guard region nothing may ever change.
type fuzzWorld struct {
	t        *testing.T
	dev      *verbs.Device
	qps      [2]*verbs.QP
	cqs      [2]*verbs.CQ
	mrs      []*verbs.MR
	guard    *verbs.MR
	accepted [2]int // WRs accepted by PostSend and PostRecv, per QP
	polled   [2]int // completions polled, per CQ
}

func newFuzzWorld(t *testing.T) *fuzzWorld {
	dev, err := verbs.Open(loopback.New())
	if err != nil {
		t.Fatal(err)
	}
	w := &fuzzWorld{t: t, dev: dev}
	pd, _ := dev.AllocPD()
	for i := range 2 {
		w.cqs[i], _ = dev.CreateCQ(4096)
		w.qps[i], _ = pd.CreateQP(verbs.QPInitAttr{SendCQ: w.cqs[i], RecvCQ: w.cqs[i], SignalAll: true,
			Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 16}})
	}
	ln, _ := dev.Listen("fuzz")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		if r, err := ln.Accept(ctx); err == nil {
			r.Accept(ctx, w.qps[1], verbs.ConnParam{})
		}
	}()
	if _, err := dev.Dial(ctx, "fuzz", w.qps[0], verbs.ConnParam{}); err != nil {
		t.Fatal(err)
	}
	all := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
	for _, a := range []verbs.Access{all, verbs.AccessRemoteRead, verbs.AccessLocalWrite} {
		mr, _ := pd.RegisterMR(make([]byte, 256), a)
		w.mrs = append(w.mrs, mr)
	}
	w.guard, _ = pd.RegisterMR(bytes.Repeat([]byte{0xA5}, 256), 0)
	return w
}

func (w *fuzzWorld) sge(s *script) verbs.SGE {
	mrs := append(w.mrs, w.guard)
	mr := mrs[s.next(len(mrs))]
	sge := mr.SGE(s.next(300), s.next(64))
	if s.next(8) == 0 {
		sge.LKey ^= uint32(s.next(256)) << 8
	}
	return sge
}

func (w *fuzzWorld) remote(s *script) verbs.RemoteAddr {
	mrs := append(w.mrs, w.guard)
	mr := mrs[s.next(len(mrs))]
	r := mr.Remote().At(uint64(s.next(300)))
	switch s.next(8) {
	case 0:
		r.RKey ^= 0x100
	case 1:
		r.Addr = s.u64()
	}
	return r
}

// step performs one random call and checks its error is typed.
func (w *fuzzWorld) step(s *script) {
	q := s.next(2)
	var err error
	switch s.next(5) {
	case 0, 1:
		n := s.next(3) + 1
		wrs := make([]verbs.SendWR, n)
		for i := range wrs {
			sgl := make([]verbs.SGE, s.next(4))
			for j := range sgl {
				sgl[j] = w.sge(s)
			}
			wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.Opcode(s.next(14)), Flags: verbs.SendFlags(s.next(16)),
				SGL: sgl, Remote: w.remote(s), CompareAdd: uint64(s.next(4)), Swap: 1,
				Flush: verbs.FlushType(s.next(8)), FlushLength: uint64(s.next(64)), InvalidateRKey: uint32(s.next(4))}
		}
		if err = w.qps[q].PostSend(wrs); err == nil {
			w.accepted[q] += n
		}
	case 2:
		sgl := make([]verbs.SGE, s.next(4))
		for j := range sgl {
			sgl[j] = w.sge(s)
		}
		if err = w.qps[q].PostRecv([]verbs.RecvWR{{SGL: sgl}}); err == nil {
			w.accepted[q]++
		}
	case 3:
		// Any transition but RESET, which discards WRs without completions.
		st := verbs.State(s.next(7))
		if st == verbs.StateReset {
			st = verbs.StateSQD
		}
		attr := verbs.QPAttr{State: st, Access: verbs.Access(s.next(16)), RNRRetry: uint8(s.next(9)), MinRNRTimer: 1}
		err = w.qps[q].Modify(&attr, verbs.AttrMask(s.next(1<<12))|verbs.AttrState)
	case 4:
		var n int
		n, err = w.cqs[q].Poll(make([]verbs.WorkCompletion, s.next(4)))
		w.polled[q] += n
	}
	if err != nil && !typed(err) {
		w.t.Fatalf("untyped error: %v", err)
	}
}

// FuzzVerbsSequence drives random sequences of verbs calls, valid and not,
// against two connected loopback QPs. Properties: nothing panics or hangs;
// every error is typed; every accepted WR completes exactly once (every WR
// is signalled); the guard region, which grants nothing, never changes.
func FuzzVerbsSequence(f *testing.F) {
	f.Add([]byte{0, 0, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 2, 1, 0, 4, 4, 3, 0, 6})
	f.Add(bytes.Repeat([]byte{1, 0, 7, 2, 9, 200, 17, 3}, 20))
	f.Add(bytes.Repeat([]byte{2, 1, 1, 0, 1, 4, 1, 3, 5, 0, 0, 1, 0}, 15))
	f.Fuzz(func(t *testing.T, in []byte) {
		w := newFuzzWorld(t)
		defer w.dev.Close()
		s := &script{b: in}
		for i := 0; len(s.b) > 0 && i < 200; i++ {
			w.step(s)
		}
		for q := range 2 {
			w.qps[q].Modify(&verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState)
		}
		wcs := make([]verbs.WorkCompletion, 64)
		for q := range 2 {
			deadline := time.Now().Add(5 * time.Second)
			for w.polled[q] < w.accepted[q] && time.Now().Before(deadline) {
				n, err := w.cqs[q].Poll(wcs)
				if err != nil {
					t.Fatalf("poll: %v", err)
				}
				w.polled[q] += n
			}
			time.Sleep(time.Millisecond)
			n, _ := w.cqs[q].Poll(wcs)
			if w.polled[q]+n != w.accepted[q] {
				t.Fatalf("QP %d: %d WRs accepted, %d completions", q, w.accepted[q], w.polled[q]+n)
			}
		}
		if !bytes.Equal(w.guard.Bytes(), bytes.Repeat([]byte{0xA5}, 256)) {
			t.Fatalf("the guard region changed")
		}
	})
}
