package roce

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/verbs"
)

// Issue 11, item 11: the side channel's listener under a flood of
// connections that never send their REQ, and after accept errors.

// acceptAll accepts every request on ln with a fresh QP of d until ctx
// ends; it returns a wait for its goroutines.
func acceptAll(ctx context.Context, d *verbs.Device, ln *verbs.Listener) (wait func()) {
	pd, _ := d.AllocPD()
	cq, _ := d.CreateCQ(4096)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			req, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
				Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				req.Reject(nil)
				continue
			}
			wg.Go(func() {
				actx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if _, err := req.Accept(actx, qp, verbs.ConnParam{}); err != nil {
					qp.Close()
				}
			})
		}
	})
	return wg.Wait
}

// dialOnce connects a fresh QP of d to addr and reports how long it took.
func dialOnce(d *verbs.Device, addr string, timeout time.Duration) (time.Duration, error) {
	pd, err := d.AllocPD()
	if err != nil {
		return 0, err
	}
	cq, err := d.CreateCQ(4)
	if err != nil {
		return 0, err
	}
	qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	_, err = d.Dial(ctx, addr, qp, verbs.ConnParam{})
	took := time.Since(start)
	qp.Close()
	cq.Close()
	pd.Close()
	return took, err
}

// TestDefectCMFloodSilent: floodConns connections from 127.0.0.1 that
// never speak, each reopened as soon as the listener drops it (so the
// flood keeps more than the caps hold, however fast they evict), while a
// legitimate device dials from the same IP. At least 99 % of the dials
// must succeed. The flood runs in a child process, as an attacker would:
// in this one its goroutines would starve the dialer's between its connect
// and its REQ, which no listener can tell from silence.
// GOVERBS_CM_FLOOD_DIALS and GOVERBS_CM_FLOOD_CONNS scale it for the
// figure of the issue.
func TestDefectCMFloodSilent(t *testing.T) {
	if addr := os.Getenv(floodChildEnv); addr != "" {
		floodChild(addr)
		return
	}
	dials := testkit.EnvInt("GOVERBS_CM_FLOOD_DIALS", 100)
	floodConns := testkit.EnvInt("GOVERBS_CM_FLOOD_CONNS", 300)
	_, d, _, _ := cmtDevice(t, Options{}, 0)
	_, client, _, _ := cmtDevice(t, Options{}, 0)
	ln, err := d.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait := acceptAll(ctx, d, ln)
	defer func() { ln.Close(); cancel(); wait() }()

	cmd := exec.Command(os.Args[0], "-test.run=^TestDefectCMFloodSilent$", "-test.count=1")
	cmd.Env = append(os.Environ(), floodChildEnv+"="+ln.Addr(), "GOVERBS_CM_FLOOD_CONNS="+strconv.Itoa(floodConns))
	child := testkit.StartChild(t, cmd, false)
	// stopFlood ends the flood and returns the child's last count.
	stopFlood := func() string {
		child.CloseStdin()
		child.Wait()
		var last string
		for l := range strings.Lines(child.Output()) {
			if strings.Contains(l, "attempts") {
				last = strings.TrimSuffix(l, "\n")
			}
		}
		return last
	}
	child.Expect(t, "FLOODING") // or the flood did not start

	var took []time.Duration
	failed := 0
	var firstErr error
	for range dials {
		d, err := dialOnce(client, ln.Addr(), 5*time.Second)
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		took = append(took, d)
	}
	stats := stopFlood()

	slices.Sort(took)
	p := func(q float64) time.Duration {
		if len(took) == 0 {
			return 0
		}
		return took[min(len(took)-1, int(q*float64(len(took))))]
	}
	t.Logf("flood of %d silent connections (%s); legitimate dials: %d of %d failed (first: %v), setup p50 %v p99 %v",
		floodConns, stats, failed, dials, firstErr, p(0.50), p(0.99))
	if failed*100 > dials {
		t.Fatalf("%d of %d legitimate dials failed during the flood (first: %v)", failed, dials, firstErr)
	}
}

const floodChildEnv = "GOVERBS_ROCE_FLOOD_CHILD"

// floodChild holds GOVERBS_CM_FLOOD_CONNS silent connections to addr,
// reopening each the listener drops, until stdin ends; it prints
// FLOODING once it holds them all, and its figures at the end.
func floodChild(addr string) {
	n := testkit.EnvInt("GOVERBS_CM_FLOOD_CONNS", 300)
	stop := make(chan struct{})
	var attempts, open, dropped atomic.Int64
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			var b [1]byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				attempts.Add(1)
				c, err := net.DialTimeout("tcp4", addr, time.Second)
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				mu.Lock()
				conns[c] = struct{}{}
				mu.Unlock()
				open.Add(1)
				c.Read(b[:]) // until the listener drops it, or the flood ends
				open.Add(-1)
				dropped.Add(1)
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
				c.Close()
			}
		})
	}
	for deadline := time.Now().Add(5 * time.Second); attempts.Load() < int64(n) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the listener is over its caps by now
	fmt.Println("FLOODING")
	io.Copy(io.Discard, os.Stdin)
	held := open.Load()
	close(stop)
	mu.Lock()
	for c := range conns {
		c.Close()
	}
	mu.Unlock()
	wg.Wait()
	fmt.Printf("%d attempts, %d dropped by the listener, %d held at the end\n", attempts.Load(), dropped.Load(), held)
}

// fakeListener fails every Accept with err.
type fakeListener struct {
	net.Listener
	err  error
	once sync.Once
	done chan struct{}
}

func (f *fakeListener) Accept() (net.Conn, error) {
	select {
	case <-f.done:
		return nil, net.ErrClosed
	default:
		return nil, f.err
	}
}

func (f *fakeListener) Close() error { f.once.Do(func() { close(f.done) }); return nil }

// TestDefectCMAcceptFatalError: an accept error that does not pass closes
// the listener, and Accept returns it instead of blocking for ever.
func TestDefectCMAcceptFatalError(t *testing.T) {
	p, _, _, _ := cmtDevice(t, Options{}, 0)
	l, err := p.opened()
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	boom := errors.New("accept: something broke for good")
	lst, err := l.serveListener(&fakeListener{Listener: tl, err: boom, done: make(chan struct{})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = lst.Accept(ctx)
	if !errors.Is(err, boom) || !errors.Is(err, provider.ErrClosed) {
		t.Fatalf("Accept = %v; want the accept error, matching ErrClosed", err)
	}
	if err := lst.Close(); err != nil {
		t.Fatalf("first Close after a fatal error = %v", err)
	}
}

// TestDefectCMAcceptTemporaryRetried: temporary errors are retried with
// backoff and the listener goes on accepting.
func TestDefectCMAcceptTemporaryRetried(t *testing.T) {
	for _, err := range []error{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}} {
		if !cmkit.Temporary(err) {
			t.Fatalf("%v is not retried", err)
		}
	}
	if cmkit.Temporary(errors.New("x")) {
		t.Fatal("an unknown error is retried")
	}
}
