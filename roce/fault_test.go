package roce_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/faultnet"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// Loss, reordering, duplication and corruption at the socket seam, under a
// stream of mixed operations: every byte must arrive intact and every WR
// complete exactly once. GOVERBS_ROCE_SEED=n replays one seed.

// Each profile applies to requests (A to B) and, unless back is set, to
// responses too. retry_cnt 7 allows eight tries without progress; a try of
// an atomic (or the start of a READ) fails when the request or its answer
// is lost. With 20% loss both ways a try fails with probability 0.36 and
// eight in a row with 3e-4, often enough in a run of a hundred such WRs to
// end in RETRY_EXC_ERR, as it would with hardware. So the 20% profiles keep
// the other direction at 1% (0.21⁸ ≈ 4e-6).
var faultProfiles = []struct {
	name string
	p    faultnet.Profile
	back *faultnet.Profile
}{
	{"drop1", faultnet.Profile{Drop: 0.01}, nil},
	{"drop20requests", faultnet.Profile{Drop: 0.20}, &faultnet.Profile{Drop: 0.01}},
	{"drop20responses", faultnet.Profile{Drop: 0.01}, &faultnet.Profile{Drop: 0.20}},
	{"reorder10", faultnet.Profile{Reorder: 0.10, Delay: 0.05, MaxDelay: 2 * time.Millisecond}, nil},
	{"duplicate20", faultnet.Profile{Dup: 0.20}, nil},
	{"corrupt10", faultnet.Profile{Corrupt: 0.10}, nil},
	{"mixed", faultnet.Profile{Drop: 0.05, Dup: 0.05, Corrupt: 0.03, Reorder: 0.05, Delay: 0.03, MaxDelay: 3 * time.Millisecond}, nil},
}

// faultSeed returns the seed for a run: GOVERBS_ROCE_SEED, or a fresh one.
func faultSeed(t *testing.T) uint64 {
	if s := os.Getenv("GOVERBS_ROCE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("GOVERBS_ROCE_SEED=%q: %v", s, err)
		}
		return v
	}
	return rand.Uint64()
}

// faultPair is two devices whose sockets inject faults, with one QP
// connected through the connection manager.
type faultPair struct {
	a, b       *verbs.Device
	qa, qb     *verbs.QP
	cqa, cqb   *verbs.CQ
	pda, pdb   *verbs.PD
	fa, fb     *faultConn
	blackout   atomic.Bool // total loss in both directions
	countersOf func() string
}

// newFaultPair connects two devices whose sockets inject p's faults (back's,
// if set, on B's side).
func newFaultPair(t *testing.T, p faultnet.Profile, back *faultnet.Profile, seed uint64, ackTimeout uint8) *faultPair {
	t.Helper()
	fp := &faultPair{}
	if back == nil {
		back = &p
	}
	wrap := func(dst **faultConn, p faultnet.Profile, s uint64) func(roce.PacketConn) roce.PacketConn {
		return func(c roce.PacketConn) roce.PacketConn {
			*dst = newFaultConn(c, p.Plan(s, &fp.blackout))
			return *dst
		}
	}
	fp.a = openDevice(t, roce.Options{WrapConn: wrap(&fp.fa, p, seed), AckTimeout: ackTimeout})
	fp.b = openDevice(t, roce.Options{WrapConn: wrap(&fp.fb, *back, seed+1), AckTimeout: ackTimeout})
	t.Cleanup(func() { fp.a.Close(); fp.b.Close() })
	cp := verbs.QPCap{MaxSendWR: 128, MaxRecvWR: 256, MaxSendSGE: 2, MaxRecvSGE: 2}
	fp.pda, fp.cqa, fp.qa = newQP(t, fp.a, cp)
	fp.pdb, fp.cqb, fp.qb = newQP(t, fp.b, cp)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	testkit.Connect(t, ctx, fp.a, fp.b, "127.0.0.1:0", fp.qa, fp.qb)
	fp.countersOf = func() string {
		return fmt.Sprintf("A %v\nB %v\ndevA %v\ndevB %v\nfaults A→B sent %d dropped %d dup %d corrupt %d reorder %d delay %d",
			testkit.NonZero(fp.qa.Counters()), testkit.NonZero(fp.qb.Counters()),
			testkit.NonZero(deviceCounters(t, fp.a)), testkit.NonZero(deviceCounters(t, fp.b)),
			fp.fa.Stats.Sent.Load(), fp.fa.Stats.Dropped.Load(), fp.fa.Stats.Duplicated.Load(),
			fp.fa.Stats.Corrupted.Load(), fp.fa.Stats.Reordered.Load(), fp.fa.Stats.Delayed.Load())
	}
	return fp
}

func TestFaultInjection(t *testing.T) {
	ops := 300
	if testing.Short() || raceEnabled {
		ops = 120
	}
	for _, prof := range faultProfiles {
		t.Run(prof.name, func(t *testing.T) {
			seed := faultSeed(t)
			t.Logf("seed %d (replay: GOVERBS_ROCE_SEED=%d go test -run 'TestFaultInjection/%s$' ./roce)", seed, seed, prof.name)
			fp := newFaultPair(t, prof.p, prof.back, seed, 12)
			runMixed(t, fp, seed, ops)
			t.Log(fp.countersOf())
		})
	}
}

// mixedRun is the bookkeeping of a stream of mixed operations.
type mixedRun struct {
	t        *testing.T
	fp       *faultPair
	r        *rand.Rand
	src      *verbs.MR // A: data sent and written
	back     *verbs.MR // A: data READ back
	res      *verbs.MR // A: atomic results
	wdst     *verbs.MR // B: WRITE target
	rsrc     *verbs.MR // B: READ source
	recv     *verbs.MR // B: receive buffers
	atom     *verbs.MR // B: counter and compare-and-swap word
	want     map[uint64]func() error
	unsig    []uint64 // unsignalled WRs not yet known to be complete
	woff     int
	roff     int
	sends    int
	adds     int
	cas      int
	done     map[uint64]bool
	recvDone int
}

const (
	mixedSrc  = 1 << 20
	mixedRecv = 4096
)

func runMixed(t *testing.T, fp *faultPair, seed uint64, ops int) {
	m := &mixedRun{t: t, fp: fp, r: rand.New(rand.NewPCG(seed, 7)), want: map[uint64]func() error{}, done: map[uint64]bool{}}
	m.src = mustMR(t, fp.pda, mixedSrc, verbs.AccessLocalWrite)
	fillRand(m.r, m.src.Bytes())
	m.back = mustMR(t, fp.pda, mixedSrc, verbs.AccessLocalWrite)
	m.res = mustMR(t, fp.pda, 8*ops, verbs.AccessLocalWrite)
	m.wdst = mustMR(t, fp.pdb, 8<<20, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessFlushGlobal)
	m.rsrc = mustMR(t, fp.pdb, mixedSrc, verbs.AccessRemoteRead)
	fillRand(m.r, m.rsrc.Bytes())
	m.recv = mustMR(t, fp.pdb, mixedRecv*ops, verbs.AccessLocalWrite)
	m.atom = mustMR(t, fp.pdb, 16, verbs.AccessLocalWrite|verbs.AccessRemoteAtomic|verbs.AccessRemoteWrite)
	for i := 0; i < ops; i++ {
		for m.outstanding() >= 48 {
			m.reap(time.Second)
		}
		wr := m.next(uint64(i + 1))
		// Half the WRs are unsignalled (never the last): a later
		// completion says they completed too.
		if i < ops-1 && m.r.IntN(2) == 0 {
			wr.Flags &^= verbs.SendSignaled
			m.unsig = append(m.unsig, wr.ID)
		}
		if err := fp.qa.PostSend([]verbs.SendWR{wr}); err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for m.outstanding() > 0 || m.recvDone < m.sends {
		if time.Now().After(deadline) {
			t.Fatalf("%d WRs and %d receives still outstanding\n%s", m.outstanding(), m.sends-m.recvDone, fp.countersOf())
		}
		m.reap(100 * time.Millisecond)
	}
	for id, check := range m.want {
		if err := check(); err != nil {
			t.Fatalf("WR %d: %v\n%s", id, err, fp.countersOf())
		}
	}
	if got := binary.NativeEndian.Uint64(m.atom.Bytes()); got != uint64(m.adds) {
		t.Fatalf("counter %d after %d fetch-and-adds", got, m.adds)
	}
}

func (m *mixedRun) outstanding() int { return len(m.want) - len(m.done) }

// next builds operation id: WRITE, WRITE with immediate, READ, SEND,
// FETCH_ADD, COMPARE_SWAP, ATOMIC WRITE or FLUSH, and records its check.
func (m *mixedRun) next(id uint64) verbs.SendWR {
	n := 1 + m.r.IntN(20000)
	if m.r.IntN(4) == 0 {
		n = 1 + m.r.IntN(64)
	}
	off := m.r.IntN(mixedSrc - n)
	wr := verbs.SendWR{ID: id, Flags: verbs.SendSignaled}
	switch k := m.r.IntN(8); k {
	case 0, 1, 2:
		dst := m.woff
		m.woff += n
		wr.Opcode, wr.SGL, wr.Remote = verbs.OpWrite, []verbs.SGE{m.src.SGE(off, n)}, m.wdst.Remote().At(uint64(dst))
		if k == 2 {
			wr.Opcode, wr.Imm = verbs.OpWriteWithImm, uint32(id)
			m.postRecv(id)
		}
		m.want[id] = func() error { return same(m.wdst.Bytes()[dst:dst+n], m.src.Bytes()[off:off+n]) }
	case 3:
		n = min(n, mixedRecv)
		slot := m.postRecv(id)
		wr.Opcode, wr.SGL = verbs.OpSend, []verbs.SGE{m.src.SGE(off, n)}
		m.want[id] = func() error { return same(m.recv.Bytes()[slot:slot+n], m.src.Bytes()[off:off+n]) }
	case 4:
		dst := m.roff % (mixedSrc - n)
		m.roff += n
		wr.Opcode, wr.SGL, wr.Remote = verbs.OpRead, []verbs.SGE{m.back.SGE(dst, n)}, m.rsrc.Remote().At(uint64(off))
		m.want[id] = func() error { return same(m.back.Bytes()[dst:dst+n], m.rsrc.Bytes()[off:off+n]) }
	case 5:
		slot := 8 * int(id-1)
		wr.Opcode, wr.CompareAdd, wr.SGL, wr.Remote = verbs.OpFetchAdd, 1, []verbs.SGE{m.res.SGE(slot, 8)}, m.atom.Remote().At(0)
		want := uint64(m.adds)
		m.adds++
		m.want[id] = func() error { return sameU64(m.res.Bytes()[slot:], want) }
	case 6:
		slot := 8 * int(id-1)
		wr.Opcode, wr.CompareAdd, wr.Swap = verbs.OpCompareSwap, uint64(m.cas), uint64(m.cas+1)
		wr.SGL, wr.Remote = []verbs.SGE{m.res.SGE(slot, 8)}, m.atom.Remote().At(8)
		want := uint64(m.cas)
		m.cas++
		m.want[id] = func() error { return sameU64(m.res.Bytes()[slot:], want) }
	default:
		wr.Opcode, wr.Flush, wr.FlushLength, wr.Remote = verbs.OpFlush, verbs.FlushGlobal, uint64(max(m.woff, 1)), m.wdst.Remote().At(0)
		m.want[id] = func() error { return nil }
	}
	return wr
}

// postRecv posts B's receive for operation id and returns its offset.
func (m *mixedRun) postRecv(id uint64) int {
	slot := mixedRecv * m.sends
	m.sends++
	err := m.fp.qb.PostRecv([]verbs.RecvWR{{ID: id, SGL: []verbs.SGE{m.recv.SGE(slot, mixedRecv)}}})
	if err != nil {
		m.t.Fatalf("post recv: %v", err)
	}
	return slot
}

// reap polls both CQs: every completion must be a success, and each WR
// completes once.
func (m *mixedRun) reap(wait time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	m.fp.cqa.Wait(ctx)
	wcs := make([]verbs.WorkCompletion, 64)
	for _, cq := range []*verbs.CQ{m.fp.cqa, m.fp.cqb} {
		n, err := cq.Poll(wcs)
		if err != nil {
			m.t.Fatal(err)
		}
		for _, wc := range wcs[:n] {
			if wc.Status != verbs.StatusSuccess {
				m.t.Fatalf("completion %+v (%v)\n%s", wc, wc.Status, m.fp.countersOf())
			}
			if wc.Opcode.IsRecv() {
				m.recvDone++
				continue
			}
			if m.done[wc.ID] || m.want[wc.ID] == nil {
				m.t.Fatalf("WR %d completed twice or was never posted", wc.ID)
			}
			m.done[wc.ID] = true
			for len(m.unsig) > 0 && m.unsig[0] < wc.ID {
				m.done[m.unsig[0]] = true
				m.unsig = m.unsig[1:]
			}
		}
	}
}

func same(got, want []byte) error {
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%d bytes differ", len(want))
	}
	return nil
}

func sameU64(b []byte, want uint64) error {
	if got := binary.NativeEndian.Uint64(b); got != want {
		return fmt.Errorf("atomic returned %d, want %d", got, want)
	}
	return nil
}

func fillRand(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

// TestTotalLoss cuts the wire after connecting: every WR ends, the first
// with RETRY_EXC_ERR and the rest flushed, after retry_cnt timeouts.
func TestTotalLoss(t *testing.T) {
	fp := newFaultPair(t, faultnet.Profile{}, nil, 1, 10)
	fp.blackout.Store(true)
	src := mustMR(t, fp.pda, 4096, verbs.AccessLocalWrite)
	dst := mustMR(t, fp.pdb, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	start := time.Now()
	for i := range 5 {
		wr := verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 4096)}, Remote: dst.Remote().At(0)}
		if i == 2 {
			wr.Opcode, wr.SGL = verbs.OpRead, []verbs.SGE{src.SGE(0, 100)}
		}
		if err := fp.qa.PostSend([]verbs.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
	}
	wcs := make([]verbs.WorkCompletion, 0, 5)
	buf := make([]verbs.WorkCompletion, 5)
	for len(wcs) < 5 {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("hang: %d of 5 completions after %v\n%s", len(wcs), time.Since(start), fp.countersOf())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		fp.cqa.Wait(ctx)
		cancel()
		n, _ := fp.cqa.Poll(buf)
		wcs = append(wcs, buf[:n]...)
	}
	for i, wc := range wcs {
		want := verbs.StatusWRFlushErr
		if i == 0 {
			want = verbs.StatusRetryExcErr
		}
		if wc.ID != uint64(i) || wc.Status != want {
			t.Fatalf("completion %d: %+v (%v), want %v", i, wc, wc.Status, want)
		}
	}
	// 7 retries of a 4.2 ms timeout, then failure.
	if d := time.Since(start); d < 8*4*time.Millisecond {
		t.Fatalf("RETRY_EXC_ERR after %v: too soon for 7 retries", d)
	}
	if st := fp.qa.State(); st != verbs.StateErr {
		t.Fatalf("QP in %v", st)
	}
	t.Log(fp.countersOf())
}
