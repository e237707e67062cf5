package verbs

import (
	"context"
	"fmt"
	"sync/atomic"
)

// QPInitAttr are the attributes of a new queue pair.
type QPInitAttr struct {
	// Type is the transport service: QPTypeRC (the zero value) or
	// QPTypeUD on devices whose Caps.UD is set.
	Type QPType
	// SendCQ and RecvCQ receive the completions of the send and receive
	// queues; they may be the same CQ.
	SendCQ, RecvCQ *CQ
	Cap            QPCap
	// SignalAll makes every send WR signalled.
	SignalAll bool
	// ForCM creates the QP in INIT, as librdmacm's rdma_create_qp does,
	// so that receives can be posted before Dial or Accept: a SEND that
	// arrives as soon as the connection is up then finds its receive.
	// The QP grants its peer RemoteAccess (every remote right when zero;
	// each region still grants its own). Without ForCM a QP starts in
	// RESET, for applications that walk RESET → INIT → RTR → RTS with
	// Modify; Dial and Accept take either.
	ForCM bool
	// RemoteAccess is the remote rights a ForCM QP grants (its
	// qp_access_flags); ignored without ForCM.
	RemoteAccess Access
	// SRQ, if not nil, is the shared receive queue the QP takes its
	// receives from (ibv_qp_init_attr.srq): Cap.MaxRecvWR and
	// Cap.MaxRecvSGE are ignored and QP.PostRecv fails. The SRQ cannot be
	// closed while the QP is open.
	SRQ *SRQ
}

// CreateQP creates a reliable-connected queue pair, in RESET, or in INIT
// with init.ForCM.
func (pd *PD) CreateQP(init QPInitAttr) (*QP, error) {
	if init.SendCQ == nil || init.RecvCQ == nil {
		return nil, fmt.Errorf("%w: a QP needs a send CQ and a receive CQ", ErrInvalidArgument)
	}
	if init.SendCQ.dev != pd.dev || init.RecvCQ.dev != pd.dev {
		return nil, fmt.Errorf("%w: the CQs belong to another device", ErrInvalidArgument)
	}
	var undo []*lifetime
	defer func() {
		for _, l := range undo {
			l.release()
		}
	}()
	lives := []*lifetime{&pd.life, &init.SendCQ.life, &init.RecvCQ.life}
	var psrq ProviderSRQ
	if init.SRQ != nil {
		if init.SRQ.pd.dev != pd.dev {
			return nil, fmt.Errorf("%w: the SRQ belongs to another device", ErrInvalidArgument)
		}
		lives, psrq = append(lives, &init.SRQ.life), init.SRQ.p
	}
	for _, l := range lives {
		if err := l.acquire(); err != nil {
			return nil, err
		}
		undo = append(undo, l)
	}
	p, err := pd.p.CreateQP(ProviderQPInitAttr{
		Type: init.Type, SendCQ: init.SendCQ.p, RecvCQ: init.RecvCQ.p, Cap: init.Cap, SignalAll: init.SignalAll,
		SRQ: psrq,
	})
	if err != nil {
		return nil, err
	}
	if init.ForCM && init.Type == QPTypeRC {
		access := init.RemoteAccess
		if access == 0 {
			access = AccessRemote
		}
		a := QPAttr{State: StateInit, Access: access, Port: 1}
		if err := p.Modify(&a, AttrState|AttrAccessFlags|AttrPort); err != nil {
			p.Close()
			return nil, fmt.Errorf("verbs: moving a new QP to INIT for the connection manager: %w", err)
		}
	}
	undo = nil
	return &QP{pd: pd, p: p, qpn: p.QPN(), typ: init.Type, sendCQ: init.SendCQ, recvCQ: init.RecvCQ, srq: init.SRQ}, nil
}

// QP is a queue pair: reliable-connected, or unreliable datagram.
type QP struct {
	pd             *PD
	typ            QPType
	p              ProviderQP
	qpn            uint32
	sendCQ, recvCQ *CQ
	srq            *SRQ // nil unless created on one
	closed         atomic.Bool
}

// SRQ returns the shared receive queue the QP takes its receives from, or
// nil.
func (qp *QP) SRQ() *SRQ { return qp.srq }

// Type returns the QP's transport service.
func (qp *QP) Type() QPType { return qp.typ }

// QPN returns the QP number.
func (qp *QP) QPN() uint32 { return qp.qpn }

// PD returns the QP's protection domain.
func (qp *QP) PD() *PD { return qp.pd }

// Modify applies the attributes named by mask and moves the QP to
// attr.State when mask has AttrState. An illegal transition, a missing
// required attribute or an attribute the transition does not take fails with
// ErrInvalidState or ErrInvalidArgument and leaves the QP unchanged
// (SEMANTICS 5).
func (qp *QP) Modify(attr *QPAttr, mask AttrMask) error {
	if err := checkModify(attr, &qp.closed); err != nil {
		return err
	}
	return qp.p.Modify(attr, mask)
}

// checkModify applies the rules a QP's and an SRQ's Modify share before the
// provider sees the call: nil attributes are an argument error, a closed
// object returns ErrClosed.
func checkModify[A any](attr *A, closed *atomic.Bool) error {
	if attr == nil {
		return fmt.Errorf("%w: nil attributes", ErrInvalidArgument)
	}
	if closed.Load() {
		return ErrClosed
	}
	return nil
}

// Query returns the QP's attributes and state.
func (qp *QP) Query() (QPAttr, error) {
	if qp.closed.Load() {
		return QPAttr{}, ErrClosed
	}
	return qp.p.Query()
}

// State returns the QP's current state (StateErr once closed).
func (qp *QP) State() State {
	a, err := qp.Query()
	if err != nil {
		return StateErr
	}
	return a.State
}

// PostSend queues send work requests in order. Every WR is checked first:
// if one is invalid (wrong state, unknown or unsupported opcode, too many
// SGEs, inline data too long, queue full), nothing is queued and the error
// is a *PostError naming it. Memory errors (a bad lkey, a range outside the
// region) are not post errors: the WR completes with StatusLocProtErr.
// The slice and its SGE lists are not retained.
func (qp *QP) PostSend(wrs []SendWR) error {
	if qp.closed.Load() {
		return &PostError{Op: "post send", Err: ErrClosed}
	}
	if qp.typ == QPTypeUD {
		if err := checkUDSends(wrs); err != nil {
			return err
		}
	}
	return qp.p.PostSend(wrs)
}

// PostRecv queues receive work requests, with PostSend's all-or-nothing
// rule. Receives may be posted from INIT on.
func (qp *QP) PostRecv(wrs []RecvWR) error {
	if qp.closed.Load() {
		return &PostError{Op: "post recv", Err: ErrClosed}
	}
	if qp.srq != nil && len(wrs) > 0 {
		return &PostError{Op: "post recv", ID: wrs[0].ID,
			Err: fmt.Errorf("%w: the QP takes its receives from SRQ %d; post them there", ErrInvalidArgument, qp.srq.srqn)}
	}
	return qp.p.PostRecv(wrs)
}

// Disconnect tells the peer the connection ends and moves the QP to ERR:
// outstanding work completes with StatusWRFlushErr. What this side's
// device already placed and completed stays delivered: the peer's WRs for
// it complete with StatusSuccess, never StatusWRFlushErr, because every
// transport acknowledges a message before its receive completion can be
// polled and before the peer can see the disconnect (SEMANTICS 16a).
func (qp *QP) Disconnect() error {
	if qp.closed.Load() {
		return ErrClosed
	}
	return qp.p.Disconnect()
}

// Close destroys the QP. The peer is told the connection ended, and
// outstanding work is flushed into the CQs before the QP goes. As with
// Disconnect, a message whose receive this side polled (or a WRITE, READ
// or atomic its device executed) completes with StatusSuccess at the peer
// however soon Close follows: a server may close on its last message.
func (qp *QP) Close() error {
	if !qp.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	err := qp.p.Close()
	qp.sendCQ.life.release()
	qp.recvCQ.life.release()
	if qp.srq != nil {
		qp.srq.life.release()
	}
	qp.pd.life.release()
	return err
}

// Listen starts accepting connection requests on addr (its syntax is the
// transport's: a name for loopback, host:port for TCP and UDP).
func (d *Device) Listen(addr string) (*Listener, error) {
	if d.isClosed() {
		return nil, ErrClosed
	}
	l, err := d.p.Listen(addr)
	if err != nil {
		return nil, err
	}
	return &Listener{dev: d, p: l}, nil
}

// Dial connects qp (in RESET or INIT) to the listener at addr, offering
// param. On success qp is in RTS and ConnInfo holds the peer's answer. A
// rejection returns a *RejectError (matching ErrRejected) with the peer's
// private data; ctx bounds the wait (transports apply a default timeout
// when ctx has no deadline).
func (d *Device) Dial(ctx context.Context, addr string, qp *QP, param ConnParam) (ConnInfo, error) {
	if qp == nil || qp.pd.dev != d {
		return ConnInfo{}, fmt.Errorf("%w: QP of another device", ErrInvalidArgument)
	}
	if qp.closed.Load() {
		return ConnInfo{}, ErrClosed
	}
	ctx, end, err := d.beginCM(ctx)
	if err != nil {
		return ConnInfo{}, err
	}
	defer end()
	info, err := d.p.Dial(ctx, addr, qp.p, param)
	return info, d.cmError(err, qp)
}

// Listener accepts connection requests.
type Listener struct {
	dev *Device
	p   ProviderListener
}

// Addr is the address peers dial.
func (l *Listener) Addr() string { return l.p.Addr() }

// Accept waits for the next connection request.
func (l *Listener) Accept(ctx context.Context) (*ConnRequest, error) {
	r, err := l.p.Accept(ctx)
	if err != nil {
		return nil, err
	}
	req := &ConnRequest{dev: l.dev, p: r}
	if !l.dev.handOut(req) {
		return nil, ErrClosed
	}
	return req, nil
}

// Close stops listening.
func (l *Listener) Close() error { return l.p.Close() }

// ConnRequest is an incoming connection request; answer it with Accept or
// Reject.
type ConnRequest struct {
	dev *Device
	p   ProviderConnRequest
}

// PrivateData is the initiator's private data.
func (r *ConnRequest) PrivateData() []byte { return r.p.PrivateData() }

// Param is the initiator's offer.
func (r *ConnRequest) Param() ConnParam { return r.p.Param() }

// Accept connects qp (in RESET or INIT) to the initiator; qp is in RTS on
// success. Accept fails with ErrClosed if qp is closed before or during
// it. A request Accept refuses before it reaches the transport (a QP of
// another device, a closed QP) stays unanswered, as after rdma_accept's
// argument errors: accept it with another QP or Reject it, or the
// initiator waits until its own deadline (Device.Close rejects it).
func (r *ConnRequest) Accept(ctx context.Context, qp *QP, param ConnParam) (ConnInfo, error) {
	if qp == nil || qp.pd.dev != r.dev {
		return ConnInfo{}, fmt.Errorf("%w: QP of another device", ErrInvalidArgument)
	}
	if qp.closed.Load() {
		return ConnInfo{}, ErrClosed
	}
	ctx, end, err := r.dev.beginCM(ctx)
	if err != nil {
		return ConnInfo{}, err // Close rejects the request
	}
	defer end()
	r.dev.answered(r)
	info, err := r.p.Accept(ctx, qp.p, param)
	return info, r.dev.cmError(err, qp)
}

// Reject refuses the request and sends privateData to the initiator.
func (r *ConnRequest) Reject(privateData []byte) error {
	r.dev.answered(r)
	return r.p.Reject(privateData)
}

// Counters returns the transport's counters for the QP (packets, bytes,
// retransmissions, NAKs, ...), or nil when the transport keeps none.
func (qp *QP) Counters() []Counter {
	if cs, ok := qp.p.(CounterSource); ok {
		return cs.Counters()
	}
	return nil
}
