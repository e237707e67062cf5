package provider

import "fmt"

// transition lists the attributes a reliable-connected QP must and may be
// given for one state transition (IBA 1.4 §11.2.4.2; the ibv_modify_qp(3)
// table). Port and P_Key index are optional where IBA requires them: every
// goverbs device has one port and one partition.
type transition struct {
	required, optional AttrMask
}

const (
	initOpt = AttrPKeyIndex | AttrPort | AttrAccessFlags
	rtsOpt  = AttrCurState | AttrAccessFlags | AttrMinRNRTimer
	sqdOpt  = AttrCurState | AttrAccessFlags | AttrMinRNRTimer | AttrTimeout | AttrRetryCnt |
		AttrRNRRetry | AttrMaxQPRdAtomic | AttrMaxDestRdAtomic | AttrPathMTU | AttrAV
)

var transitions = map[[2]State]transition{
	{StateReset, StateInit}: {required: AttrAccessFlags, optional: AttrPKeyIndex | AttrPort},
	{StateInit, StateInit}:  {optional: initOpt},
	{StateInit, StateRTR}: {
		required: AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer,
		optional: AttrAccessFlags | AttrPKeyIndex,
	},
	{StateRTR, StateRTS}: {
		required: AttrSQPSN | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMaxQPRdAtomic,
		optional: rtsOpt,
	},
	{StateRTS, StateRTS}: {optional: rtsOpt},
	{StateRTS, StateSQD}: {optional: AttrEnSQDAsyncNotify},
	{StateSQD, StateSQD}: {optional: sqdOpt},
	{StateSQD, StateRTS}: {optional: rtsOpt},
	{StateSQE, StateRTS}: {optional: AttrCurState | AttrAccessFlags},
}

// CheckTransition validates a Modify of a QP in state cur: the transition
// must be legal and mask must hold every required attribute and no
// attribute the transition does not take. Any state may move to RESET or
// ERR, with no other attribute. It returns the target state.
func CheckTransition(cur State, attr *QPAttr, mask AttrMask) (State, error) {
	if mask&AttrCurState != 0 && attr.CurState != cur {
		return cur, fmt.Errorf("%w: current state is %v, not %v", ErrInvalidState, cur, attr.CurState)
	}
	next := cur
	if mask&AttrState != 0 {
		next = attr.State
	}
	if !next.Valid() {
		return cur, fmt.Errorf("%w: unknown QP state %d", ErrInvalidArgument, next)
	}
	rest := mask &^ (AttrState | AttrCurState)
	if next == StateReset || next == StateErr {
		if mask&AttrState == 0 {
			return cur, fmt.Errorf("%w: attributes cannot change in %v", ErrInvalidState, cur)
		}
		if rest != 0 {
			return cur, fmt.Errorf("%w: a transition to %v takes no attributes (mask %#x)", ErrInvalidArgument, next, uint32(rest))
		}
		return next, nil
	}
	t, ok := transitions[[2]State{cur, next}]
	if !ok {
		return cur, fmt.Errorf("%w: illegal transition %v -> %v", ErrInvalidState, cur, next)
	}
	if missing := t.required &^ mask; missing != 0 {
		return cur, fmt.Errorf("%w: %v -> %v requires attributes %s", ErrInvalidArgument, cur, next, missing)
	}
	if extra := rest &^ (t.required | t.optional); extra != 0 {
		return cur, fmt.Errorf("%w: %v -> %v does not take attributes %s", ErrInvalidArgument, cur, next, extra)
	}
	return next, nil
}

// CheckQPAttr validates the attribute values mask selects against the
// device's capabilities c: access flags, path MTU, READ/atomic depths,
// retry counts, the RNR timer, 24-bit PSNs and QP numbers, port 1 and
// P_Key index 0. Transitions are CheckTransition's.
func CheckQPAttr(a *QPAttr, mask AttrMask, c *Caps) error {
	switch {
	case mask&AttrAccessFlags != 0 && a.Access&^(AccessRemote|AccessLocalWrite|AccessMWBind) != 0:
		return fmt.Errorf("%w: QP access flags %v", ErrInvalidArgument, a.Access)
	case mask&AttrPathMTU != 0 && (!a.PathMTU.Valid() || a.PathMTU > c.PathMTU):
		return fmt.Errorf("%w: path MTU %d (256 to %d)", ErrInvalidArgument, a.PathMTU, c.PathMTU)
	case mask&AttrMaxQPRdAtomic != 0 && a.MaxRdAtomic > c.MaxQPRdAtom:
		return fmt.Errorf("%w: max_rd_atomic %d exceeds %d", ErrInvalidArgument, a.MaxRdAtomic, c.MaxQPRdAtom)
	case mask&AttrMaxDestRdAtomic != 0 && a.MaxDestRdAtomic > c.MaxQPInitRdAtom:
		return fmt.Errorf("%w: max_dest_rd_atomic %d exceeds %d", ErrInvalidArgument, a.MaxDestRdAtomic, c.MaxQPInitRdAtom)
	case mask&AttrRetryCnt != 0 && a.RetryCnt > 7, mask&AttrRNRRetry != 0 && a.RNRRetry > 7:
		return fmt.Errorf("%w: retry counts are 0 to 7", ErrInvalidArgument)
	case mask&AttrMinRNRTimer != 0 && a.MinRNRTimer > 31:
		return fmt.Errorf("%w: min_rnr_timer is 0 to 31", ErrInvalidArgument)
	case mask&(AttrRQPSN|AttrSQPSN|AttrDestQPN) != 0 &&
		(a.RQPSN > 0xFFFFFF || a.SQPSN > 0xFFFFFF || a.DestQPN > 0xFFFFFF):
		return fmt.Errorf("%w: PSNs and QP numbers are 24-bit", ErrInvalidArgument)
	case mask&AttrPort != 0 && a.Port != 1:
		return fmt.Errorf("%w: port %d (the device has port 1)", ErrInvalidArgument, a.Port)
	case mask&AttrPKeyIndex != 0 && a.PKeyIndex != 0:
		return fmt.Errorf("%w: P_Key index %d (the device has index 0)", ErrInvalidArgument, a.PKeyIndex)
	}
	return nil
}
