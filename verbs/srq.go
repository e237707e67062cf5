package verbs

import (
	"fmt"
	"sync/atomic"
)

// SRQ is a shared receive queue (ibv_srq): receive WRs any QP created on it
// (QPInitAttr.SRQ) consumes, one per incoming SEND or WRITE with
// immediate, in posting order across all of them. A server with many QPs
// posts its receive buffers once, here, instead of on every QP.
//
// A receive completes into the receive CQ of the QP that consumed it,
// with that QP's number. When one QP fails, only the receives it had
// already taken are flushed (into its CQ); the SRQ's posted receives stay
// for the other QPs, and the failed QP takes no more. Once such a QP is in
// ERR and none of its receives is still outstanding, the device raises
// EventQPLastWQEReached for it: from then on it may be destroyed without
// losing a completion.
type SRQ struct {
	pd     *PD
	p      ProviderSRQ
	srqn   uint32
	life   lifetime // users: QPs created on the SRQ
	closed atomic.Bool
}

// CreateSRQ creates a shared receive queue holding attr.MaxWR receives of
// at most attr.MaxSGE entries, with the limit event armed at attr.Limit
// (zero: not armed). It fails with ErrNotSupported on a device whose
// Caps.MaxSRQ is zero.
func (pd *PD) CreateSRQ(attr SRQAttr) (*SRQ, error) {
	c := pd.dev.caps
	creator, ok := pd.p.(ProviderSRQCreator)
	if c.MaxSRQ == 0 || !ok {
		return nil, fmt.Errorf("%w: %s has no shared receive queues", ErrNotSupported, c.Name)
	}
	if err := pd.life.acquire(); err != nil {
		return nil, err
	}
	p, err := creator.CreateSRQ(attr)
	if err != nil {
		pd.life.release()
		return nil, err
	}
	return &SRQ{pd: pd, p: p, srqn: p.SRQN()}, nil
}

// SRQN is the number asynchronous events name the SRQ by (AsyncEvent.SRQN).
func (s *SRQ) SRQN() uint32 { return s.srqn }

// PD returns the SRQ's protection domain: its receives' lkeys are checked
// against it.
func (s *SRQ) PD() *PD { return s.pd }

// PostRecv queues receive WRs on the SRQ (ibv_post_srq_recv), with
// QP.PostRecv's all-or-nothing rule: a WR with too many SGEs, or one that
// does not fit, fails the whole post with a *PostError.
func (s *SRQ) PostRecv(wrs []RecvWR) error {
	if s.closed.Load() {
		return &PostError{Op: "post srq recv", Err: ErrClosed}
	}
	return s.p.PostRecv(wrs)
}

// Modify changes the attributes mask names (ibv_modify_srq): SRQAttrLimit
// arms the limit event at attr.Limit, or disarms it with zero. Resizing
// (SRQAttrMaxWR) fails with ErrNotSupported where the device cannot.
func (s *SRQ) Modify(attr *SRQAttr, mask SRQAttrMask) error {
	if err := checkModify(attr, &s.closed); err != nil {
		return err
	}
	return s.p.Modify(attr, mask)
}

// Query returns the SRQ's attributes; Limit reads zero once the limit
// event fired.
func (s *SRQ) Query() (SRQAttr, error) {
	if s.closed.Load() {
		return SRQAttr{}, ErrClosed
	}
	return s.p.Query()
}

// Close destroys the SRQ; the receives still posted are dropped without a
// completion. It fails with ErrBusy while a QP created on it is open.
func (s *SRQ) Close() error {
	if err := s.life.close("QPs use the SRQ"); err != nil {
		return err
	}
	s.closed.Store(true)
	err := s.p.Close()
	s.pd.life.release()
	return err
}
