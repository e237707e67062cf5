package soft

import (
	"fmt"

	"github.com/goverbs/goverbs/provider"
)

// UD queue pairs. A soft device creates them when its caps say UD (the
// link sets it in AdjustCaps); they use the same queues and completions as
// RC QPs, and the link's Connect, called on INIT → RTR, attaches the
// endpoint that sends each WQE as one datagram to its WR's address handle.

// AHLink is implemented by links with UD QPs: CreateAH resolves an
// address for PD.CreateAH (provider.ProviderAHCreator).
type AHLink interface {
	CreateAH(av provider.AddressVector) (any, error)
}

// CreateAH resolves av through the link (ibv_create_ah).
func (p *PD) CreateAH(av provider.AddressVector) (any, error) {
	l, ok := p.dev.link.(AHLink)
	if !ok || !p.dev.caps.UD {
		return nil, fmt.Errorf("%w: %s has no UD queue pairs", provider.ErrNotSupported, p.dev.caps.Name)
	}
	return l.CreateAH(av)
}

// Type returns the QP's transport service.
func (qp *QP) Type() provider.QPType { return qp.typ }

// QKey returns a UD QP's Q_Key without locking, for the link's receive
// path.
func (qp *QP) QKey() uint32 { return qp.qkey.Load() }

func (d *Device) checkQPType(t provider.QPType) error {
	switch {
	case t == provider.QPTypeRC:
		return nil
	case t == provider.QPTypeUD && d.caps.UD:
		return nil
	}
	return fmt.Errorf("%w: %s does not create %v queue pairs", provider.ErrNotSupported, d.caps.Name, t)
}

// udTransitions are the attributes a UD QP must and may be given (IBA
// §11.2.4.2 for UD; the ibv_modify_qp(3) table): a Q_Key at INIT, a send
// PSN at RTS, nothing that names a peer.
var udTransitions = map[[2]provider.State][2]provider.AttrMask{
	{provider.StateReset, provider.StateInit}: {provider.AttrQKey, provider.AttrPKeyIndex | provider.AttrPort},
	{provider.StateInit, provider.StateInit}:  {0, provider.AttrQKey | provider.AttrPKeyIndex | provider.AttrPort},
	{provider.StateInit, provider.StateRTR}:   {0, provider.AttrQKey | provider.AttrPKeyIndex},
	{provider.StateRTR, provider.StateRTS}:    {provider.AttrSQPSN, provider.AttrQKey | provider.AttrCurState},
	{provider.StateRTS, provider.StateRTS}:    {0, provider.AttrQKey | provider.AttrCurState},
	{provider.StateRTS, provider.StateSQD}:    {0, provider.AttrEnSQDAsyncNotify},
	{provider.StateSQD, provider.StateRTS}:    {0, provider.AttrQKey | provider.AttrCurState},
	{provider.StateSQE, provider.StateRTS}:    {0, provider.AttrQKey | provider.AttrCurState},
}

// checkUDTransition is provider.CheckTransition for a UD QP.
func checkUDTransition(cur provider.State, attr *provider.QPAttr, mask provider.AttrMask) (provider.State, error) {
	if mask&provider.AttrCurState != 0 && attr.CurState != cur {
		return cur, fmt.Errorf("%w: current state is %v, not %v", provider.ErrInvalidState, cur, attr.CurState)
	}
	next := cur
	if mask&provider.AttrState != 0 {
		next = attr.State
	}
	if !next.Valid() {
		return cur, fmt.Errorf("%w: unknown QP state %d", provider.ErrInvalidArgument, next)
	}
	rest := mask &^ (provider.AttrState | provider.AttrCurState)
	if next == provider.StateReset || next == provider.StateErr {
		if mask&provider.AttrState == 0 || rest != 0 {
			return cur, fmt.Errorf("%w: a transition to %v takes only the state", provider.ErrInvalidArgument, next)
		}
		return next, nil
	}
	t, ok := udTransitions[[2]provider.State{cur, next}]
	if !ok {
		return cur, fmt.Errorf("%w: illegal UD transition %v -> %v", provider.ErrInvalidState, cur, next)
	}
	if missing := t[0] &^ mask; missing != 0 {
		return cur, fmt.Errorf("%w: UD %v -> %v requires attributes %s", provider.ErrInvalidArgument, cur, next, missing)
	}
	if extra := rest &^ (t[0] | t[1]); extra != 0 {
		return cur, fmt.Errorf("%w: UD %v -> %v does not take attributes %s", provider.ErrInvalidArgument, cur, next, extra)
	}
	return next, nil
}
