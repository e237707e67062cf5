package devcore

import (
	"fmt"
	"sync"

	"github.com/goverbs/goverbs/provider"
)

// CheckQPCap applies the device's limits to the capacities a CreateQP
// asks for: at least one send WR, and no queue, SGE list or inline size
// beyond the device's.
func CheckQPCap(c provider.QPCap, d *provider.Caps) error {
	switch {
	case c.MaxSendWR < 1 || c.MaxSendWR > d.MaxQPWR || c.MaxRecvWR > d.MaxQPWR:
		return fmt.Errorf("%w: queue sizes send %d recv %d (1 to %d)", provider.ErrInvalidArgument, c.MaxSendWR, c.MaxRecvWR, d.MaxQPWR)
	case c.MaxSendSGE > d.MaxSGE || c.MaxRecvSGE > d.MaxSGE:
		return fmt.Errorf("%w: SGE limits send %d recv %d (at most %d)", provider.ErrInvalidArgument, c.MaxSendSGE, c.MaxRecvSGE, d.MaxSGE)
	case c.MaxInlineData > d.MaxInlineData:
		return fmt.Errorf("%w: inline data %d (at most %d)", provider.ErrInvalidArgument, c.MaxInlineData, d.MaxInlineData)
	}
	return nil
}

// CheckModify applies Modify's rules to a QP in state cur: it is open,
// the transition that attr and mask ask for is legal by rule (SEMANTICS
// 5: provider.CheckTransition for an RC QP) and the attribute values are
// within the device's limits. It returns the state the QP moves to.
func CheckModify(closed bool, cur provider.State, attr *provider.QPAttr, mask provider.AttrMask, d *provider.Caps,
	rule func(cur provider.State, attr *provider.QPAttr, mask provider.AttrMask) (provider.State, error)) (provider.State, error) {
	if closed {
		return cur, provider.ErrClosed
	}
	next, err := rule(cur, attr, mask)
	if err == nil {
		err = provider.CheckQPAttr(attr, mask, d)
	}
	return next, err
}

// EnterState finishes a Modify to next whose checks passed; mu, the QP's
// lock, is held. ERR and RESET are more than a state: fail and reset make
// them, each taking mu itself, so EnterState releases mu, calls the one
// next asks for and reports true. For any other state it copies into t
// the attributes of a that mask names (ApplyAttr) and reports false, mu
// still held, for the caller to enter next.
func EnterState(mu *sync.Mutex, next provider.State, t, a *provider.QPAttr, mask provider.AttrMask, fail, reset func()) (done bool) {
	switch next {
	case provider.StateErr:
		mu.Unlock()
		fail()
		return true
	case provider.StateReset:
		mu.Unlock()
		reset()
		return true
	}
	ApplyAttr(t, a, mask)
	return false
}

// QueryAttr is what Query reports for a QP with attributes attr in state
// st, or ErrClosed when it is closed; draining says an SQD QP still has
// send WRs under way.
func QueryAttr(closed bool, attr provider.QPAttr, st provider.State, draining bool) (provider.QPAttr, error) {
	if closed {
		return provider.QPAttr{}, provider.ErrClosed
	}
	attr.State, attr.CurState = st, st
	attr.SQDraining = st == provider.StateSQD && draining
	return attr, nil
}

// ApplyAttr copies into t the attributes of a that mask names (all but
// the state and the capacities, which the provider applies itself).
func ApplyAttr(t, a *provider.QPAttr, mask provider.AttrMask) {
	set := func(bit provider.AttrMask, apply func()) {
		if mask&bit != 0 {
			apply()
		}
	}
	set(provider.AttrAccessFlags, func() { t.Access = a.Access })
	set(provider.AttrAV, func() { t.AV = a.AV })
	set(provider.AttrPathMTU, func() { t.PathMTU = a.PathMTU })
	set(provider.AttrTimeout, func() { t.Timeout = a.Timeout })
	set(provider.AttrRetryCnt, func() { t.RetryCnt = a.RetryCnt })
	set(provider.AttrRNRRetry, func() { t.RNRRetry = a.RNRRetry })
	set(provider.AttrRQPSN, func() { t.RQPSN = a.RQPSN })
	set(provider.AttrSQPSN, func() { t.SQPSN = a.SQPSN })
	set(provider.AttrMaxQPRdAtomic, func() { t.MaxRdAtomic = a.MaxRdAtomic })
	set(provider.AttrMaxDestRdAtomic, func() { t.MaxDestRdAtomic = a.MaxDestRdAtomic })
	set(provider.AttrMinRNRTimer, func() { t.MinRNRTimer = a.MinRNRTimer })
	set(provider.AttrDestQPN, func() { t.DestQPN = a.DestQPN })
	set(provider.AttrEnSQDAsyncNotify, func() { t.EnSQDAsyncNotify = a.EnSQDAsyncNotify })
}

// CheckDisconnect applies Disconnect's rules to a QP: it is open and
// connected.
func CheckDisconnect(closed, connected bool) error {
	switch {
	case closed:
		return provider.ErrClosed
	case !connected:
		return fmt.Errorf("%w: QP is not connected", provider.ErrInvalidState)
	}
	return nil
}

// CheckCreateQP applies CreateQP's rules to init: both CQs belong to the
// device (own converts one to the provider's type C and says whether it
// does) and the capacities are within its limits (CheckQPCap).
func CheckCreateQP[C any](init provider.QPInitAttr, d *provider.Caps, own func(provider.CQ) (C, bool)) (send, recv C, err error) {
	send, ok1 := own(init.SendCQ)
	recv, ok2 := own(init.RecvCQ)
	if !ok1 || !ok2 {
		return send, recv, fmt.Errorf("%w: the QP's CQs must belong to its device", provider.ErrInvalidArgument)
	}
	return send, recv, CheckQPCap(init.Cap, d)
}

// CloseOnce marks an object closed; the second Close of it gets
// ErrClosed. The caller holds the lock that guards closed.
func CloseOnce(closed *bool) error {
	if *closed {
		return provider.ErrClosed
	}
	*closed = true
	return nil
}

// CheckSRQAttr applies CreateSRQ's rules to attr: at least one WR and no
// more than the device's MaxSRQWR, no more SGEs than MaxSRQSGE, and a
// limit within the depth.
func CheckSRQAttr(attr provider.SRQAttr, d *provider.Caps) error {
	switch {
	case d.MaxSRQ == 0:
		return fmt.Errorf("%w: %s has no shared receive queues", provider.ErrNotSupported, d.Name)
	case attr.MaxWR < 1 || attr.MaxWR > d.MaxSRQWR:
		return fmt.Errorf("%w: SRQ of %d WRs (1 to %d)", provider.ErrInvalidArgument, attr.MaxWR, d.MaxSRQWR)
	case attr.MaxSGE > d.MaxSRQSGE:
		return fmt.Errorf("%w: SRQ SGE limit %d (at most %d)", provider.ErrInvalidArgument, attr.MaxSGE, d.MaxSRQSGE)
	case attr.Limit > attr.MaxWR:
		return fmt.Errorf("%w: SRQ limit %d above its %d WRs", provider.ErrInvalidArgument, attr.Limit, attr.MaxWR)
	}
	return nil
}
