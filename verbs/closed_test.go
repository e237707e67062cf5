package verbs_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/loopback"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// TestCreateCQTooLarge: a CQ beyond the device's MaxCQE is refused, also
// when the count does not fit 32 bits (it was truncated, passed the check
// and the allocation killed the process).
func TestCreateCQTooLarge(t *testing.T) {
	dev := testkit.Open(t, loopback.New())
	for _, n := range []int{int(dev.Caps().MaxCQE) + 1, 1<<40 + 16, 1 << 32} {
		if cq, err := dev.CreateCQ(n); !errors.Is(err, verbs.ErrInvalidArgument) {
			if cq != nil {
				cq.Close()
			}
			t.Errorf("CreateCQ(%d): %v, want ErrInvalidArgument", n, err)
		}
	}
}

// TestObjectsOfClosedDevice: after Device.Close a Wait blocked on one of
// its CQs returns ErrClosed, the completions its QPs flushed are still
// polled, and every object of the device returns ErrClosed: a region is
// neither registered nor left counted against its PD, and nothing dials.
func TestObjectsOfClosedDevice(t *testing.T) {
	dev, err := verbs.Open(loopback.New())
	if err != nil {
		t.Fatal(err)
	}
	pd := testkit.Must(dev.AllocPD())(t)
	cq := testkit.Must(dev.CreateCQ(16))(t)
	idle := testkit.Must(dev.CreateCQ(4))(t)
	qp := testkit.Must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}))(t)
	mr := testkit.Must(pd.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite))(t)
	if err := qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessRemoteWrite}, verbs.AttrState|verbs.AttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostRecv([]verbs.RecvWR{{ID: 7, SGL: []verbs.SGE{mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { waited <- idle.Wait(ctx) }()
	time.Sleep(20 * time.Millisecond) // the waiter blocks
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, verbs.ErrClosed) {
			t.Errorf("Wait blocked across Device.Close: %v, want ErrClosed", err)
		}
	case <-time.After(time.Second):
		t.Fatal("a Wait blocked on a CQ of the device did not return when the device closed")
	}
	wc := make([]verbs.WorkCompletion, 4)
	if n, err := cq.Poll(wc); n != 1 || err != nil || wc[0].ID != 7 || wc[0].Status != verbs.StatusWRFlushErr {
		t.Errorf("Poll after Device.Close: %d %v %+v, want the flushed receive", n, err, wc[:n])
	}
	res := map[string]error{}
	_, res["Poll (drained)"] = cq.Poll(wc)
	res["Wait"] = cq.Wait(ctx)
	_, res["RegisterMR"] = pd.RegisterMR(make([]byte, 8), verbs.AccessLocalWrite)
	_, res["AllocMW"] = pd.AllocMW(verbs.MWType2)
	_, res["Dial"] = dev.Dial(ctx, "nowhere", qp, verbs.ConnParam{})
	res["Deregister"] = mr.Deregister()
	res["CQ.Close"] = cq.Close()
	res["PD.Close"] = pd.Close()
	for what, err := range res {
		if !errors.Is(err, verbs.ErrClosed) {
			t.Errorf("%s after Device.Close: %v, want ErrClosed", what, err)
		}
	}
}

// TestPollWaitNoRoom: PollWait with no room for a completion is an
// argument error, not 0 and nil at once (a caller looping on it spun).
func TestPollWaitNoRoom(t *testing.T) {
	dev := testkit.Open(t, loopback.New())
	cq := testkit.Must(dev.CreateCQ(4))(t)
	if n, err := cq.PollWait(context.Background(), nil); n != 0 || !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("PollWait(nil): %d, %v; want 0, ErrInvalidArgument", n, err)
	}
}

// TestCloseRejectsUnansweredRequest: a request that Listener.Accept
// handed out and nobody answered is rejected when the listener's device
// closes, so its dialer learns at once (it waited out its timeout), and
// answering it afterwards fails with ErrClosed.
func TestCloseRejectsUnansweredRequest(t *testing.T) {
	for name, open := range cmProviders() {
		t.Run(name, func(t *testing.T) {
			pa, pb, addr := open()
			a, b := testkit.Open(t, pa), testkit.Open(t, pb)
			ln := testkit.Must(b.Listen(addr))(t)
			qa, qb := newQP(t, a), newQP(t, b)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			dialed := make(chan error, 1)
			go func() {
				_, err := a.Dial(ctx, ln.Addr(), qa, verbs.ConnParam{})
				dialed <- err
			}()
			req := testkit.Must(ln.Accept(ctx))(t)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := <-dialed; !errors.Is(err, verbs.ErrRejected) {
				t.Fatalf("dial to a listener whose device closed: %v, want ErrRejected", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("the rejection took %v", d)
			}
			if _, err := req.Accept(ctx, qb, verbs.ConnParam{}); !errors.Is(err, verbs.ErrClosed) {
				t.Fatalf("Accept after the device closed: %v, want ErrClosed", err)
			}
			if qa.State() == verbs.StateRTS {
				t.Fatal("the rejected dialer's QP is in RTS")
			}
		})
	}
}

// forEachCM runs f once per transport of cmProviders, with two of its
// devices (b listening on ln) and a context bounding the test.
func forEachCM(t *testing.T, f func(t *testing.T, ctx context.Context, a, b *verbs.Device, ln *verbs.Listener)) {
	for name, open := range cmProviders() {
		t.Run(name, func(t *testing.T) {
			pa, pb, addr := open()
			a, b := testkit.Open(t, pa), testkit.Open(t, pb)
			ln := testkit.Must(b.Listen(addr))(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			f(t, ctx, a, b, ln)
		})
	}
}

// cmProviders are the transports whose connection management the verbs
// layer ties to the device's life, each with the address to listen on.
func cmProviders() map[string]func() (a, b verbs.Provider, addr string) {
	ps := map[string]func() (verbs.Provider, verbs.Provider, string){
		"loopback": func() (verbs.Provider, verbs.Provider, string) {
			n := loopback.NewNetwork()
			return n.Provider(), n.Provider(), "l"
		},
		"iwarp": func() (verbs.Provider, verbs.Provider, string) {
			return iwarp.New(), iwarp.New(), "127.0.0.1:0"
		},
		"roce": func() (verbs.Provider, verbs.Provider, string) {
			o := roce.Options{Addr: "127.0.0.1:0"}
			return roce.New(o), roce.New(o), "127.0.0.1:0"
		},
	}
	if runtime.GOOS == "linux" {
		ps["shm"] = func() (verbs.Provider, verbs.Provider, string) {
			return shm.New(shm.Options{}), shm.New(shm.Options{}), ""
		}
	}
	return ps
}

func newQP(t *testing.T, d *verbs.Device) *verbs.QP {
	pd := testkit.Must(d.AllocPD())(t)
	cq := testkit.Must(d.CreateCQ(8))(t)
	return testkit.Must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}))(t)
}

// TestDroppedRequestsForgotten: a request the user dropped without
// answering, which the transport then answered itself (its dialer gave
// up), is not kept until Close: a server that ignores requests would
// otherwise hold every one it was ever handed.
func TestDroppedRequestsForgotten(t *testing.T) {
	const rounds = 150
	forEachCM(t, func(t *testing.T, ctx context.Context, a, b *verbs.Device, ln *verbs.Listener) {
		for range rounds {
			dctx, leave := context.WithCancel(ctx)
			req, dialed := dialing(t, dctx, a, ln, verbs.ConnParam{})
			_ = req // dropped, never answered
			leave()
			if err := <-dialed; err == nil {
				t.Fatal("a dial nobody accepted connected")
			}
		}
		if n := verbs.PendingRequests(b); n >= rounds/2 {
			t.Fatalf("the device keeps %d of %d dropped requests whose dialers left", n, rounds)
		}
	})
}
