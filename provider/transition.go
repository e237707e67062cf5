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
	if next >= numStates {
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

var attrNames = [...]string{
	"STATE", "ACCESS_FLAGS", "PKEY_INDEX", "PORT", "AV", "PATH_MTU", "TIMEOUT", "RETRY_CNT",
	"RNR_RETRY", "RQ_PSN", "MAX_QP_RD_ATOMIC", "MIN_RNR_TIMER", "SQ_PSN", "MAX_DEST_RD_ATOMIC",
	"DEST_QPN", "CAP", "CUR_STATE", "EN_SQD_ASYNC_NOTIFY",
}

func (m AttrMask) String() string {
	s := ""
	for i, n := range attrNames {
		if m&(1<<i) != 0 {
			if s != "" {
				s += "|"
			}
			s += n
		}
	}
	if s == "" {
		return "none"
	}
	return s
}
