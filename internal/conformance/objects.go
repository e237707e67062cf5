package conformance

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// SEMANTICS 1, 2 and 4: capabilities, object lifetimes, key randomness.
var objectTests = []test{
	{"Caps", testCaps},
	{"LimitsRefused", testLimitsRefused},
	{"PDBusy", testPDBusy},
	{"CQBusy", testCQBusy},
	{"MRBusyWithOutstandingWR", testMRBusyWithOutstandingWR},
	{"DoubleClose", testDoubleClose},
	{"CloseWhilePosting", testCloseWhilePosting},
	{"KeysRandom", testKeysRandom},
	{"RetiredKeysNotReused", testRetiredKeysNotReused},
}

func testCaps(t *testing.T, e *Env) {
	for _, c := range []verbs.Caps{e.A.Caps(), e.B.Caps()} {
		switch {
		case c.Name == "" || c.Transport == "":
			t.Errorf("caps name %q transport %q: both must be set", c.Name, c.Transport)
		case c.DataPath != verbs.DataPathSoftware && c.DataPath != verbs.DataPathHardware:
			t.Errorf("caps data path %v", c.DataPath)
		case c.MaxQP == 0 || c.MaxQPWR == 0 || c.MaxSGE == 0 || c.MaxCQ == 0 || c.MaxCQE == 0 ||
			c.MaxMR == 0 || c.MaxPD == 0 || c.MaxMRSize == 0 || c.MaxMsgSize == 0:
			t.Errorf("caps report a zero limit: %+v", c)
		case c.WriteCompletion == 0:
			t.Errorf("caps do not say what a WRITE completion proves")
		case c.MaxPrivateData <= 0:
			t.Errorf("caps MaxPrivateData %d", c.MaxPrivateData)
		case !c.PathMTU.Valid():
			t.Errorf("caps path MTU %d", c.PathMTU)
		case !c.RNRRetry && c.RNRRule == "":
			t.Errorf("caps: no RNR retry and no documented RNR rule")
		}
		for _, op := range []verbs.Opcode{verbs.OpSend, verbs.OpWrite, verbs.OpRead} {
			if !c.Opcodes.Has(op) {
				t.Errorf("caps: %v missing; every RC transport executes it", op)
			}
		}
		atomics := c.Opcodes.Has(verbs.OpCompareSwap) || c.Opcodes.Has(verbs.OpFetchAdd)
		if atomics != (c.AtomicScope != verbs.AtomicScope(0)) {
			t.Errorf("caps: atomic opcodes %v but atomic scope %v", atomics, c.AtomicScope)
		}
	}
}

// testLimitsRefused checks that asking for more than the caps fails cleanly.
func testLimitsRefused(t *testing.T, e *Env) {
	c := e.A.Caps()
	if _, err := e.A.CreateCQ(int(c.MaxCQE) + 1); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("CQ above max_cqe: %v, want ErrInvalidArgument", err)
	}
	if _, err := e.A.CreateCQ(0); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("CQ of 0 entries: %v, want ErrInvalidArgument", err)
	}
	pd := must(e.A.AllocPD())(t)
	cq := must(e.A.CreateCQ(16))(t)
	ok := defaultCap(c)
	bad := []verbs.QPCap{ok, ok, ok, ok}
	bad[0].MaxSendWR = c.MaxQPWR + 1
	bad[1].MaxSendSGE = c.MaxSGE + 1
	bad[2].MaxInlineData = c.MaxInlineData + 1
	bad[3].MaxSendWR = 0
	for _, cp := range bad {
		if qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: cp}); err == nil {
			qp.Close()
			t.Errorf("QP with caps %+v created; device max %+v", cp, c)
		}
	}
	if _, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, Cap: ok}); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("QP without a receive CQ: %v", err)
	}
	if err := cq.Close(); err != nil {
		t.Errorf("CQ close after refused QPs: %v (a refused QP must not hold it)", err)
	}
	if err := pd.Close(); err != nil {
		t.Errorf("PD close after refused QPs: %v", err)
	}
}

func testPDBusy(t *testing.T, e *Env) {
	pd := must(e.A.AllocPD())(t)
	mr := must(pd.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite))(t)
	if err := pd.Close(); !errors.Is(err, verbs.ErrBusy) {
		t.Fatalf("close PD with a region: %v, want ErrBusy", err)
	}
	cq := must(e.A.CreateCQ(4))(t)
	qp := must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: defaultCap(e.A.Caps())}))(t)
	noErr(t, mr.Deregister())
	if err := pd.Close(); !errors.Is(err, verbs.ErrBusy) {
		t.Fatalf("close PD with a QP: %v, want ErrBusy", err)
	}
	// The refused closes changed nothing: the PD still works.
	mr2 := must(pd.RegisterMR(make([]byte, 8), verbs.AccessLocalWrite))(t)
	noErr(t, mr2.Deregister())
	noErr(t, qp.Close())
	noErr(t, pd.Close())
	noErr(t, cq.Close())
}

func testCQBusy(t *testing.T, e *Env) {
	pd := must(e.A.AllocPD())(t)
	scq := must(e.A.CreateCQ(4))(t)
	rcq := must(e.A.CreateCQ(4))(t)
	qp := must(pd.CreateQP(verbs.QPInitAttr{SendCQ: scq, RecvCQ: rcq, Cap: defaultCap(e.A.Caps())}))(t)
	for _, cq := range []*verbs.CQ{scq, rcq} {
		if err := cq.Close(); !errors.Is(err, verbs.ErrBusy) {
			t.Fatalf("close CQ used by a QP: %v, want ErrBusy", err)
		}
	}
	noErr(t, qp.Close())
	noErr(t, scq.Close())
	noErr(t, rcq.Close())
	noErr(t, pd.Close())
}

// testMRBusyWithOutstandingWR holds a WRITE in a drained send queue (SQD)
// and checks its region cannot be deregistered until it completes.
func testMRBusyWithOutstandingWR(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(64, verbs.AccessLocalWrite)
	dst := c.peerMR(64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	c.sqd()
	c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 64)}, Remote: dst.Remote.At(0)})
	if err := src.Deregister(); !errors.Is(err, verbs.ErrBusy) {
		t.Fatalf("deregister a region a posted WR uses: %v, want ErrBusy", err)
	}
	noErr(t, c.QP.Modify(&verbs.QPAttr{State: verbs.StateRTS}, verbs.AttrState))
	expectWC(t, c.poll(1)[0], 1, verbs.StatusSuccess)
	if err := src.Deregister(); err != nil {
		t.Fatalf("deregister after completion: %v", err)
	}
}

func testDoubleClose(t *testing.T, e *Env) {
	pd := must(e.A.AllocPD())(t)
	cq := must(e.A.CreateCQ(4))(t)
	qp := must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: defaultCap(e.A.Caps())}))(t)
	mr := must(pd.RegisterMR(make([]byte, 8), verbs.AccessLocalWrite))(t)
	closes := []struct {
		name  string
		close func() error
	}{
		{"QP", qp.Close}, {"MR", mr.Deregister}, {"CQ", cq.Close}, {"PD", pd.Close},
	}
	for _, c := range closes {
		if err := c.close(); err != nil {
			t.Fatalf("first close of %s: %v", c.name, err)
		}
		if err := c.close(); !errors.Is(err, verbs.ErrClosed) {
			t.Fatalf("second close of %s: %v, want ErrClosed", c.name, err)
		}
	}
	if err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend}}); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("post on a closed QP: %v, want ErrClosed", err)
	}
}

// testKeysRandom checks keys and QP numbers are distinct, non-zero and not
// sequential (SEMANTICS 4).
func testKeysRandom(t *testing.T, e *Env) {
	pd := must(e.A.AllocPD())(t)
	var lkeys, rkeys []uint32
	for range 64 {
		m := must(pd.RegisterMR(make([]byte, 8), verbs.AccessLocalWrite|verbs.AccessRemoteRead))(t)
		defer m.Deregister()
		lkeys = append(lkeys, m.LKey())
		rkeys = append(rkeys, m.RKey())
	}
	cq := must(e.A.CreateCQ(4))(t)
	var qpns []uint32
	for range 32 {
		qp := must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: defaultCap(e.A.Caps())}))(t)
		defer qp.Close()
		qpns = append(qpns, qp.QPN())
	}
	checkRandom(t, "lkeys", lkeys)
	checkRandom(t, "rkeys", rkeys)
	checkRandom(t, "QP numbers", qpns)
	seen := map[uint32]bool{}
	for _, k := range append(lkeys, rkeys...) {
		if seen[k] {
			t.Fatalf("key %#x handed out twice", k)
		}
		seen[k] = true
	}
}

// checkRandom fails on zeros, duplicates, or a constant stride.
func checkRandom(t *testing.T, what string, v []uint32) {
	t.Helper()
	seen := map[uint32]bool{}
	strides := map[uint32]int{}
	for i, x := range v {
		if x == 0 || seen[x] {
			t.Fatalf("%s: zero or duplicate value %#x", what, x)
		}
		seen[x] = true
		if i > 0 {
			strides[x-v[i-1]]++
		}
	}
	for s, n := range strides {
		if n > len(v)/4 {
			t.Fatalf("%s: %d of %d steps are %#x: sequential, not random", what, n, len(v)-1, s)
		}
	}
}

// testRetiredKeysNotReused checks a deregistered key does not come back
// among the next registrations.
func testRetiredKeysNotReused(t *testing.T, e *Env) {
	pd := must(e.A.AllocPD())(t)
	old := must(pd.RegisterMR(make([]byte, 8), verbs.AccessLocalWrite|verbs.AccessRemoteRead))(t)
	lk, rk := old.LKey(), old.RKey()
	noErr(t, old.Deregister())
	for range 2000 {
		m := must(pd.RegisterMR(make([]byte, 8), verbs.AccessLocalWrite|verbs.AccessRemoteRead))(t)
		if m.LKey() == lk || m.RKey() == rk || m.LKey() == rk || m.RKey() == lk {
			t.Fatalf("retired key reused after deregistration")
		}
		noErr(t, m.Deregister())
	}
}

// testCloseWhilePosting closes a connected QP while two goroutines post
// WRITEs and receives to it and poll its CQ, as an application's writer
// goroutine does when another closes the connection. Nothing panics,
// faults or hangs (a link may free in Detach what posting touches: shm's
// control segments); before Close each post succeeds or finds its queue
// full, a post racing Close may fail as the device says, and after Close
// every post fails with ErrClosed.
func testCloseWhilePosting(t *testing.T, e *Env) {
	for round := range 10 {
		c := connect(t, e, ConnOpts{})
		src := c.mr(64, verbs.AccessLocalWrite)
		dst := c.peerMR(64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		var (
			wg, started sync.WaitGroup
			closing     atomic.Bool
		)
		errs := make(chan error, 2)
		for g := range 2 {
			wg.Add(1)
			started.Add(1)
			go func() {
				defer wg.Done()
				posting := sync.OnceFunc(started.Done) // after 8 posts, or on leaving early
				defer posting()
				wcs := make([]verbs.WorkCompletion, 16)
				sge := []verbs.SGE{src.SGE(32*g, 32)}
				for i := 0; ; i++ {
					if i == 8 {
						posting()
					}
					flags := verbs.SendFlags(0)
					if i%8 == 0 {
						flags = verbs.SendSignaled
					}
					err := c.QP.PostSend([]verbs.SendWR{{ID: uint64(i), Opcode: verbs.OpWrite, Flags: flags,
						SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote.At(0)}})
					if err == nil {
						err = c.QP.PostRecv([]verbs.RecvWR{{ID: uint64(i), SGL: sge}})
					}
					if err == nil || errors.Is(err, verbs.ErrQueueFull) {
						_, err = c.CQ.Poll(wcs)
					}
					if err != nil {
						if closing.Load() {
							err = nil
						}
						errs <- err
						return
					}
				}
			}()
		}
		started.Wait()
		time.Sleep(time.Duration(round) * 20 * time.Microsecond) // close at a different point of each round
		closing.Store(true)
		noErr(t, c.QP.Close())
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(Timeout):
			t.Fatalf("round %d: posts still running %v after Close", round, Timeout)
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: post or poll before Close: %v, want success or ErrQueueFull", round, err)
			}
		}
		err := c.QP.PostSend([]verbs.SendWR{{Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote.At(0)}})
		if !errors.Is(err, verbs.ErrClosed) {
			t.Fatalf("round %d: post after Close: %v, want ErrClosed", round, err)
		}
	}
}
