//go:build cgo && libfabric

package fabric

import (
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/internal/keyspace"
	"github.com/goverbs/goverbs/provider"
)

// QP is a reliable-connected queue pair over a connected libfabric endpoint
// (FI_EP_MSG).
//
// The verbs state machine lives here, in Go, over the endpoint's life: a QP
// in RESET or INIT has no endpoint; Dial or Accept opens one in the PD's
// domain, binds the CQs and the device's event queue, and moves the QP to
// RTS when libfabric reports FI_CONNECTED. Entering ERR (an error
// completion, Modify, Disconnect, the peer's shutdown) shuts the endpoint
// down and closes it, so libfabric gives back every operation; the work
// requests it had not completed are flushed, in posting order. RESET
// discards everything, and a later Dial or Accept opens a fresh endpoint.
//
// Both work queues are rings of WQEs indexed by monotonic sequence numbers
// ([tail, next) handed to libfabric or done, [next, head) posted and
// waiting). Completions are delivered in posting order whatever order
// libfabric reports them in.
//
// Locks: the fields up to ctx are set by CreateQP and read-only after;
// scratch and inline are written under mu when a WR is posted and read by
// libfabric until it completes. mu guards everything after it (torn is a
// condition on mu: maybeTeardown waits on it for a teardown under way).
// Goroutines that take mu: the application's (Post*, Modify, Query,
// Disconnect, Close), whoever reads a CQ of the QP (Poll, Wait, the
// completion loop, a teardown's drain: they dispatch completions), the
// event loop (eqEvent), the completion loop (retry of a stalled QP), the
// teardown timer and a CQ's FailQPs goroutine. With mu held a QP takes the
// key table (reading), progress.mu, and the CQs' rings and the device's
// events (leaves); it never holds mu while closing its endpoint or reading
// a CQ (maybeTeardown drops it first), and never two QPs' at once.
type QP struct {
	dev      *Device
	pd       *PD
	scq, rcq *CQ
	sf, rf   *fcq
	cap      provider.QPCap
	sigAll   bool
	qpn      uint32
	index    uint32
	tagBase  uint64 // (index+1)<<32
	ctx      hCtx   // 2 contexts per send slot, then 1 per receive slot

	// Per send slot: the compare and operand of an atomic, and the copy
	// of inline data. Pinned Go memory: libfabric reads it until the WR
	// completes.
	scratch     []uint64
	inline      []byte
	pin         runtime.Pinner
	scratchMR   hMR
	scratchDesc uint64

	// desc describes the operation being posted: kept here, not on the
	// stack, because a pointer passed to C escapes. Guarded by mu.
	desc wrDesc

	mu           sync.Mutex
	torn         sync.Cond // signalled when a teardown ends
	state        provider.State
	attr         provider.QPAttr
	sq           sendQueue
	rq           recvQueue
	ep           hEP
	epInfo       hInfo        // the fi_info ep was opened with
	connWait     chan eqEvent // while Dial or Accept waits for FI_CONNECTED
	needTeardown bool
	tearing      bool
	stalled      bool        // libfabric said EAGAIN; the progress goroutine retries
	peerGone     bool        // EventPeerDisconnected was raised for this connection
	peerShut     bool        // the peer shut the connection down (FI_SHUTDOWN)
	errCause     uint64      // see enterErrLocked
	timer        *time.Timer // a deferred teardown
	closed       bool
}

// CreateQP implements provider.PD.
func (p *PD) CreateQP(init provider.QPInitAttr) (provider.QP, error) {
	d := p.dev
	scq, rcq, err := devcore.CheckCreateQP(init, &d.caps, d.ownCQ)
	if err != nil {
		return nil, err
	}
	c := init.Cap
	d.mu.Lock()
	err = d.roomLocked(len(d.allQPs), d.caps.MaxQP, "queue pairs")
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	sf, err := p.fcqFor(scq)
	if err != nil {
		return nil, err
	}
	rf, err := p.fcqFor(rcq)
	if err != nil {
		return nil, err
	}
	qp := &QP{dev: d, pd: p, scq: scq, rcq: rcq, sf: sf, rf: rf, cap: c, sigAll: init.SignalAll}
	qp.torn.L = &qp.mu
	if err := qp.allocResources(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.allQPs[qp] = struct{}{}
	d.mu.Unlock()
	scq.ring.Attach(qp)
	rcq.ring.Attach(qp)
	return qp, nil
}

// allocResources sets up the queues, the C contexts and the scratch memory.
func (qp *QP) allocResources() error {
	c := qp.cap
	qp.sq.init(c)
	qp.rq.init(c)
	qp.resetAttrLocked()
	index, qpn, err := qp.dev.qps.add(qp)
	if err != nil {
		return err
	}
	qp.index, qp.qpn, qp.tagBase = index, qpn, uint64(index+1)<<32
	nctx := 2*int(c.MaxSendWR) + int(c.MaxRecvWR)
	if qp.ctx = _C_ctx_alloc(nctx, qp.tagBase); qp.ctx == 0 {
		qp.dev.qps.remove(index, qpn)
		return fmt.Errorf("%w: contexts for %d operations", provider.ErrLimit, nctx)
	}
	qp.scratch = make([]uint64, 2*c.MaxSendWR)
	qp.pin.Pin(&qp.scratch[0])
	if c.MaxInlineData > 0 {
		qp.inline = make([]byte, int(c.MaxInlineData)*int(c.MaxSendWR))
		qp.pin.Pin(&qp.inline[0])
	}
	if qp.dev.feat.mrLocal && qp.dev.caps.AtomicScope != provider.AtomicNone {
		// Atomic operands are local buffers: FI_MR_LOCAL wants them
		// registered.
		mr, _, desc, err := _C_mr_reg(qp.pd.dom, uintptr(unsafe.Pointer(&qp.scratch[0])), 8*len(qp.scratch),
			fiSend|fiWrite|fiRecv|fiRead, uint64(keyspace.Random32()))
		if err != nil {
			qp.freeResources()
			return opErr("fi_mr_reg(atomic operands)", err)
		}
		qp.scratchMR, qp.scratchDesc = mr, desc
	}
	return nil
}

func (qp *QP) freeResources() {
	if qp.scratchMR != 0 {
		_C_close(qp.scratchMR)
		qp.scratchMR = 0
	}
	qp.pin.Unpin()
	if qp.ctx != 0 {
		_C_free(qp.ctx)
		qp.ctx = 0
	}
	qp.dev.qps.remove(qp.index, qp.qpn)
}

// newDescLocked returns the QP's operation description, cleared.
// Precondition: qp.mu is held.
func (qp *QP) newDescLocked() *wrDesc {
	d := &qp.desc
	d.op, d.nsge, d.flags, d.ctx, d.raddr, d.rkey, d.data = 0, 0, 0, 0, 0, 0, 0
	d.cmp, d.operand, d.cmpDesc, d.opDesc = 0, 0, 0, 0
	return d
}

// ctxAddr is the address of operation context i.
func (qp *QP) ctxAddr(i int) uint64 { return uint64(qp.ctx) + uint64(i)*uint64(ctxSize) }

// resetAttrLocked gives the QP the attributes of a fresh QP in RESET.
// Precondition: qp.mu is held (or the QP is not yet shared).
func (qp *QP) resetAttrLocked() {
	qp.attr = provider.QPAttr{PathMTU: qp.dev.caps.PathMTU, Port: 1, Cap: qp.cap}
	qp.setStateLocked(provider.StateReset)
}

func (qp *QP) setStateLocked(s provider.State) { qp.state, qp.attr.State = s, s }

// QPN implements provider.QP.
func (qp *QP) QPN() uint32 { return qp.qpn }

// Query implements provider.QP.
func (qp *QP) Query() (provider.QPAttr, error) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return devcore.QueryAttr(qp.closed, qp.attr, qp.state, qp.sq.inflight > 0)
}

// Modify implements provider.QP. The transitions a connection manager
// makes (INIT to RTR to RTS) happen in Dial and Accept: a libfabric
// endpoint connects only through fi_connect/fi_accept, so Modify to RTR
// fails with ErrNotSupported (Caps.ManualConnect is false). Timeout,
// retry counts, path MTU and the RNR timer are kept for Query; libfabric
// has no such knobs.
func (qp *QP) Modify(attr *provider.QPAttr, mask provider.AttrMask) error {
	qp.mu.Lock()
	next, err := devcore.CheckModify(qp.closed, qp.state, attr, mask, &qp.dev.caps, provider.CheckTransition)
	if err == nil && mask&provider.AttrCap != 0 {
		// A libfabric endpoint's queue sizes are fixed when it is created.
		err = fmt.Errorf("%w: queue sizes cannot change", provider.ErrNotSupported)
	}
	if err == nil && next == provider.StateRTR {
		err = fmt.Errorf("%w: a libfabric QP connects through Dial and Accept (fi_connect/fi_accept), not Modify", provider.ErrNotSupported)
	}
	if err != nil {
		qp.mu.Unlock()
		return err
	}
	if devcore.EnterState(&qp.mu, next, &qp.attr, attr, mask, qp.modifyToErr, qp.reset) {
		return nil
	}
	qp.setStateLocked(next)
	if next == provider.StateRTS {
		qp.pumpLocked() // RTS from SQD resumes the send queue
	}
	qp.mu.Unlock()
	qp.maybeTeardown()
	return nil
}

// complete takes one libfabric completion of the QP: context slot i.
func (qp *QP) complete(i uint32, e *cqEntry) {
	qp.mu.Lock()
	if n := uint32(2 * qp.sq.Depth()); i < n {
		qp.sendCompletionLocked(i/2, e)
	} else {
		qp.recvCompletionLocked(i-n, e)
	}
	tear := qp.needTeardown
	qp.mu.Unlock()
	if tear {
		// The caller reads a CQ the teardown must read too.
		go qp.maybeTeardown()
	}
}

// stall records that libfabric refused an operation for now (EAGAIN): the
// progress goroutine retries it.
// Precondition: qp.mu is held.
func (qp *QP) stallLocked() {
	if !qp.stalled {
		qp.stalled = true
		qp.dev.prog.stall(qp)
	}
}

// retry resubmits what a stall held back; it reports whether the QP is
// still stalled.
func (qp *QP) retry() bool {
	qp.mu.Lock()
	qp.stalled = false
	qp.submitRecvsLocked()
	qp.pumpLocked()
	still := qp.stalled
	tear := qp.needTeardown
	qp.mu.Unlock()
	if tear {
		qp.maybeTeardown()
	}
	return still
}
