package soft

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// QP is a reliable-connected queue pair of a soft device.
//
// Locks: the fields up to sigAll are set by CreateQP and read-only after.
// mu guards everything after it: the state, the attributes, both work
// queues, ep and closed. It is taken by the application's goroutines (Post*,
// Modify, Query, Close) and by the link's (NextSend, CompleteSend,
// NextRecv, CompleteRecv, Fail, Establish); a WQE the link took is the
// link's until it completes it, and the queue's again after. With mu held
// the QP takes the key table (PostSend, PostRecv, local operations) and
// pushes into its CQs (leaves); it calls its Endpoint only after letting
// mu go. The responder reads remoteAccess, and CanReceive stateMirror,
// without the lock.
type QP struct {
	dev            *Device
	pd             *PD
	qpn            uint32
	sendCQ, recvCQ *CQ
	cap            provider.QPCap
	sigAll         bool
	typ            provider.QPType // fixed at creation
	srq            *SRQ            // the SRQ it takes receives from, or nil

	qkey atomic.Uint32 // attr.QKey of a UD QP, for the link's receive path

	remoteAccess atomic.Uint32 // attr.Access, for the responder
	stateMirror  atomic.Uint32 // state, for lock-free readers

	mu     sync.Mutex
	state  provider.State
	attr   provider.QPAttr
	sq     sendQueue
	rq     recvQueue
	ep     Endpoint
	closed bool
	// epCalls counts calls to ep under way outside mu (unlockThen); reset
	// waits for them before it detaches ep.
	epCalls atomic.Int64
	// srqHead and srqTail chain the SRQ WQEs the QP took, oldest first;
	// lastWQE says EventQPLastWQEReached was raised since it entered ERR.
	srqHead, srqTail *RecvWQE
	lastWQE          bool

	srqWaiting bool // in srq.waiters; guarded by srq.mu
}

// CQs returns the CQs the QP completes into (the same one twice when it
// has one).
func (qp *QP) CQs() (send, recv *CQ) { return qp.sendCQ, qp.recvCQ }

func (p *PD) CreateQP(init provider.QPInitAttr) (provider.QP, error) {
	d := p.dev
	scq, rcq, err := devcore.CheckCreateQP(init, &d.caps, d.ownCQ)
	if err != nil {
		return nil, err
	}
	c := init.Cap
	if err := d.checkQPType(init.Type); err != nil {
		return nil, err
	}
	var srq *SRQ
	if init.SRQ != nil {
		s, ok := init.SRQ.(*SRQ)
		if !ok || s.dev != d {
			return nil, fmt.Errorf("%w: the QP's SRQ must belong to its device", provider.ErrInvalidArgument)
		}
		// The receive queue is the SRQ's: the QP keeps no ring.
		srq, c.MaxRecvWR, c.MaxRecvSGE = s, 0, 0
	}
	if err := d.count(&d.nQP, d.caps.MaxQP, "queue pairs"); err != nil {
		return nil, err
	}
	qp := &QP{dev: d, pd: p, sendCQ: scq, recvCQ: rcq, cap: c, sigAll: init.SignalAll, typ: init.Type, srq: srq}
	qp.sq.init(c)
	qp.rq.init(c)
	qp.resetAttrLocked()
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		d.nQP.Add(-1)
		return nil, provider.ErrClosed
	}
	qp.qpn = newQPN(func(n uint32) bool { _, used := d.qps[n]; return used })
	d.qps[qp.qpn] = qp
	d.mu.Unlock()
	scq.ring.Attach(qp)
	rcq.ring.Attach(qp)
	if srq != nil {
		srq.attach()
	}
	return qp, nil
}

// resetAttrLocked gives the QP the attributes of a fresh QP in RESET.
// Precondition: qp.mu is held (or the QP is not yet shared).
func (qp *QP) resetAttrLocked() {
	qp.attr = provider.QPAttr{
		PathMTU: qp.dev.caps.PathMTU,
		Port:    1,
		Cap:     qp.cap,
	}
	qp.setStateLocked(provider.StateReset)
	qp.remoteAccess.Store(0)
}

// setStateLocked moves the QP to s.
// Precondition: qp.mu is held.
func (qp *QP) setStateLocked(s provider.State) {
	qp.state, qp.attr.State = s, s
	qp.stateMirror.Store(uint32(s))
}

// CanReceive reports, without locking, whether the QP is in a state that
// accepts incoming requests (RTR, RTS, SQD or SQE). A peer's requests to a
// QP that cannot receive go unanswered.
func (qp *QP) CanReceive() bool {
	switch provider.State(qp.stateMirror.Load()) {
	case provider.StateRTR, provider.StateRTS, provider.StateSQD, provider.StateSQE:
		return true
	}
	return false
}

func (qp *QP) QPN() uint32 { return qp.qpn }

// PD returns the QP's protection domain.
func (qp *QP) PD() *PD { return qp.pd }

// Device returns the QP's device.
func (qp *QP) Device() *Device { return qp.dev }

// State returns the QP's current state.
func (qp *QP) State() provider.State {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.state
}

// Attr returns a copy of the QP's attributes.
func (qp *QP) Attr() provider.QPAttr {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.attr
}

func (qp *QP) Query() (provider.QPAttr, error) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return devcore.QueryAttr(qp.closed, qp.attr, qp.state, qp.sq.Next != qp.sq.Tail)
}

// Modify applies a state transition and attributes (SEMANTICS 5).
func (qp *QP) Modify(attr *provider.QPAttr, mask provider.AttrMask) error {
	rule := provider.CheckTransition
	if qp.typ == provider.QPTypeUD {
		rule = checkUDTransition
	}
	qp.mu.Lock()
	cur := qp.state
	next, err := devcore.CheckModify(qp.closed, cur, attr, mask, &qp.dev.caps, rule)
	if err != nil {
		qp.mu.Unlock()
		return err
	}
	var ep Endpoint
	if cur == provider.StateInit && next == provider.StateRTR && qp.ep == nil {
		// The link may look up other QPs: call it without our lock,
		// then make sure nobody moved the QP meanwhile.
		qp.mu.Unlock()
		if ep, err = qp.dev.link.Connect(qp, attr); err != nil {
			return err
		}
		qp.mu.Lock()
		if qp.state != cur || qp.closed {
			qp.mu.Unlock()
			ep.Detach()
			return fmt.Errorf("%w: QP changed state during Modify", provider.ErrInvalidState)
		}
		qp.ep = ep
	}
	if devcore.EnterState(&qp.mu, next, &qp.attr, attr, mask, qp.modifyToErr, qp.reset) {
		return nil
	}
	if mask&provider.AttrAccessFlags != 0 {
		qp.remoteAccess.Store(uint32(attr.Access))
	}
	if mask&provider.AttrQKey != 0 {
		qp.attr.QKey = attr.QKey
		qp.qkey.Store(attr.QKey)
	}
	qp.setStateLocked(next)
	if next != provider.StateRTS {
		qp.mu.Unlock()
		return nil
	}
	qp.unlockThen(Endpoint.SendReady) // RTS from SQD resumes the queue
	return nil
}

// DriveFromPolls registers e with the CQs the QP completes into, so that
// their empty Polls run it (PolledEngine), until the returned function
// takes it off. The endpoint calls it once it is connected.
func (qp *QP) DriveFromPolls(e PolledEngine) (stop func()) {
	qp.sendCQ.setEngines(e, true)
	if qp.recvCQ != qp.sendCQ {
		qp.recvCQ.setEngines(e, true)
	}
	return func() {
		qp.sendCQ.setEngines(e, false)
		if qp.recvCQ != qp.sendCQ {
			qp.recvCQ.setEngines(e, false)
		}
	}
}
