package iwarp_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// TestQPTimeoutIsTCPUserTimeout connects QPs with several retry counts and
// checks, on each end's TCP socket as the kernel reports it, that
// TCP_USER_TIMEOUT is the QP's ACK timeout × (retry count + 1), and at
// least the RNR budget and 400 ms more, as package iwarp documents: TCP
// then gives up on a lost link when roce's requester would, with
// RETRY_EXC_ERR.
func TestQPTimeoutIsTCPUserTimeout(t *testing.T) {
	// The connection manager gives every QP Timeout 14: 67.108864 ms a
	// try. The kernel keeps the option in whole milliseconds.
	noRNR := iwarp.RNRBudget(0) // no RNR wait: the floor is 400 ms
	for _, tc := range []struct {
		retry uint8
		opt   iwarp.Option
		want  time.Duration
	}{
		{retry: 7, opt: noRNR, want: 536 * time.Millisecond}, // 8 tries: 536.87 ms
		{retry: 5, opt: noRNR, want: 402 * time.Millisecond}, // 6 tries: 402.65 ms
		{retry: 4, opt: noRNR, want: 400 * time.Millisecond}, // 5 tries: 335.54 ms, below the floor
		{retry: 1, opt: noRNR, want: 400 * time.Millisecond}, // 2 tries: 134.22 ms, below the floor
		{retry: 0, opt: noRNR, want: 536 * time.Millisecond}, // 0 asks for the default, 7
		{retry: 9, opt: noRNR, want: 536 * time.Millisecond}, // above 7 is 7
		{retry: 7, opt: iwarp.RNRBudget(100 * time.Millisecond), want: 536 * time.Millisecond},
		{retry: 7, opt: iwarp.RNRBudget(200 * time.Millisecond), want: 600 * time.Millisecond},
		{retry: 7, want: iwarp.DefaultRNRBudget + 400*time.Millisecond}, // the default budget, 1 s
	} {
		var opts []iwarp.Option
		if tc.opt != nil {
			opts = append(opts, tc.opt)
		}
		a, b := openDev(t, opts...), openDev(t, opts...)
		pa, pb := must(a.AllocPD()), must(b.AllocPD())
		qa, _ := newQP(t, a, pa)
		qb, _ := newQP(t, b, pb)
		ln := must(b.Listen("127.0.0.1:0"))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		param := verbs.ConnParam{RetryCount: tc.retry}
		srv := make(chan error, 1)
		var srvInfo verbs.ConnInfo
		go func() {
			req, err := ln.Accept(ctx)
			if err == nil {
				srvInfo, err = req.Accept(ctx, qb, param)
			}
			srv <- err
		}()
		info, err := a.Dial(ctx, ln.Addr(), qa, param)
		if err == nil {
			err = <-srv
		}
		cancel()
		ln.Close()
		if err != nil {
			t.Fatalf("retry %d: connect: %v", tc.retry, err)
		}
		for _, end := range []struct {
			name  string
			qp    *verbs.QP
			local string
		}{{"dialer", qa, info.LocalAddr}, {"acceptor", qb, srvInfo.LocalAddr}} {
			attr, err := end.qp.Query()
			if err != nil {
				t.Fatal(err)
			}
			wantRetry := min(tc.retry, 7)
			if wantRetry == 0 {
				wantRetry = 7 // ConnParam's default
			}
			if attr.Timeout != 14 || attr.RetryCnt != wantRetry {
				t.Errorf("retry %d, %s: QP reports Timeout %d RetryCnt %d", tc.retry, end.name, attr.Timeout, attr.RetryCnt)
			}
			got := userTimeoutOf(t, end.local)
			if got != tc.want {
				t.Errorf("retry %d, %s: TCP_USER_TIMEOUT %v, want %v (QP Timeout %d, RetryCnt %d)",
					tc.retry, end.name, got, tc.want, attr.Timeout, attr.RetryCnt)
			}
		}
		qa.Close()
		qb.Close()
	}
}

// userTimeoutOf finds this process's TCP socket bound to local (as
// ConnInfo reports it) among its descriptors and returns its
// TCP_USER_TIMEOUT.
func userTimeoutOf(t *testing.T, local string) time.Duration {
	t.Helper()
	want, err := netip.ParseAddrPort(local)
	if err != nil {
		t.Fatalf("local address %q: %v", local, err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot list descriptors: %v", err)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			continue
		}
		var got netip.AddrPort
		switch in := sa.(type) {
		case *unix.SockaddrInet4:
			got = netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port))
		case *unix.SockaddrInet6:
			got = netip.AddrPortFrom(netip.AddrFrom16(in.Addr).Unmap(), uint16(in.Port))
		}
		if got != want {
			continue
		}
		if typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_STREAM {
			continue
		}
		if peer, err := unix.Getpeername(fd); err != nil || peer == nil {
			continue // a listener on the same port
		}
		ms, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
		if err != nil {
			t.Fatalf("getsockopt TCP_USER_TIMEOUT: %v", err)
		}
		return time.Duration(ms) * time.Millisecond
	}
	t.Fatalf("no connected TCP socket bound to %s among this process's descriptors", local)
	return 0
}

// TestRNRWaitIsNotALostPeer streams SENDs at a QP that posts no receive.
// The receiver stops reading the stream while it waits for one (the RNR
// budget, 1 s), its TCP window shuts, and Linux counts a shut window
// against TCP_USER_TIMEOUT even while the peer answers its probes: the
// user timeout must outlast the budget, so that the sender learns the
// RNR outcome from the receiver's Terminate (RNR_RETRY_EXC_ERR), not a
// lost peer (RETRY_EXC_ERR) from TCP.
func TestRNRWaitIsNotALostPeer(t *testing.T) {
	const size, n = 256 << 10, 128 // 32 MiB: more than both socket buffers
	a, b := openDev(t), openDev(t)
	p := connectDevs(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mr := must(p.pa.RegisterMR(make([]byte, size), verbs.AccessLocalWrite))
	wrs := make([]verbs.SendWR, n)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{mr.SGE(0, size)}}
	}
	start := time.Now()
	if err := p.qa.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	wc := make([]verbs.WorkCompletion, n)
	var first verbs.Status
	for got := 0; got < n; {
		k, err := p.cqa.PollWait(ctx, wc)
		if err != nil {
			t.Fatalf("after %d completions: %v", got, err)
		}
		for _, w := range wc[:k] {
			if got == 0 {
				first = w.Status
				t.Logf("first completion after %v: %v", time.Since(start).Round(time.Millisecond), w.Status)
			} else if w.Status != verbs.StatusWRFlushErr {
				t.Errorf("WR %d completed %v after the first, want flushed", w.ID, w.Status)
			}
			got++
		}
	}
	if first != verbs.StatusRNRRetryExcErr {
		t.Errorf("first SEND completed %v, want %v: the sender took the receiver's RNR wait for a lost peer", first, verbs.StatusRNRRetryExcErr)
	}
}

// passThrough hides the *net.TCPConn under a net.Conn that only forwards,
// as a capture or fault-injecting WrapConn does.
type passThrough struct{ net.Conn }

// TestWrappedConnGetsQPTimeout: a connection under WrapConn gets the QP's
// TCP_USER_TIMEOUT too. Through the wrapper the engine could not set it,
// and the socket kept the handshake's 30 s: a lost peer took 30 s to
// notice, not the QP's 1.4 s.
func TestWrappedConnGetsQPTimeout(t *testing.T) {
	wrap := iwarp.WrapConn(func(c net.Conn) net.Conn { return passThrough{c} })
	a, b := openDev(t, wrap), openDev(t, wrap)
	qa, _ := newQP(t, a, must(a.AllocPD()))
	qb, _ := newQP(t, b, must(b.AllocPD()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ln := must(b.Listen("127.0.0.1:0"))
	defer ln.Close()
	srv := make(chan error, 1)
	var srvInfo verbs.ConnInfo
	go func() {
		req, err := ln.Accept(ctx)
		if err == nil {
			srvInfo, err = req.Accept(ctx, qb, verbs.ConnParam{})
		}
		srv <- err
	}()
	info, err := a.Dial(ctx, ln.Addr(), qa, verbs.ConnParam{})
	if err == nil {
		err = <-srv
	}
	if err != nil {
		t.Fatal(err)
	}
	want := iwarp.DefaultRNRBudget + 400*time.Millisecond
	for _, end := range []struct{ name, local string }{{"dialer", info.LocalAddr}, {"acceptor", srvInfo.LocalAddr}} {
		// The acceptor's engine starts with its Accept; the dialer's
		// a moment after Dial returns.
		got := userTimeoutOf(t, end.local)
		for deadline := time.Now().Add(2 * time.Second); got != want && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
			got = userTimeoutOf(t, end.local)
		}
		if got != want {
			t.Errorf("%s, wrapped: TCP_USER_TIMEOUT %v, want the QP's %v", end.name, got, want)
		}
	}
}
