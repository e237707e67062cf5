package verbs

import "fmt"

// State is a QP state (ibv_qp_state).
type State uint8

// QP states.
const (
	StateReset State = iota // created; nothing can be posted
	StateInit               // receives can be posted
	StateRTR                // ready to receive: connected to a peer QP
	StateRTS                // ready to send
	StateSQD                // send queue drained: new sends wait
	StateSQE                // send queue error: a send failed, receives continue
	StateErr                // error: every outstanding WR is flushed
	numStates
)

var stateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Valid reports whether s is one of the QP states.
func (s State) Valid() bool { return s < numStates }

// MTU is a path MTU in bytes: 256, 512, 1024, 2048 or 4096.
type MTU uint16

// Valid reports whether m is one of the IB path MTUs.
func (m MTU) Valid() bool {
	switch m {
	case 256, 512, 1024, 2048, 4096:
		return true
	}
	return false
}

// AttrMask names the attributes of a Modify (ibv_qp_attr_mask).
type AttrMask uint32

// Attribute mask bits.
const (
	AttrState AttrMask = 1 << iota
	AttrAccessFlags
	AttrPKeyIndex
	AttrPort
	AttrAV // the address of the peer (AddressVector)
	AttrPathMTU
	AttrTimeout
	AttrRetryCnt
	AttrRNRRetry
	AttrRQPSN
	AttrMaxQPRdAtomic // ORD
	AttrMinRNRTimer
	AttrSQPSN
	AttrMaxDestRdAtomic // IRD
	AttrDestQPN
	AttrCap
	AttrCurState
	AttrEnSQDAsyncNotify
	AttrQKey // the Q_Key of a UD QP (from RESET to INIT)
)

// AddressVector names the peer of a QP connected by hand (ibv_ah_attr). Its
// meaning belongs to the transport: for RoCEv2 an IP address (GID) and UDP
// port, for loopback nothing beyond the destination QPN.
type AddressVector struct {
	// Addr is the peer's transport address ("ip:port"); empty for
	// transports that need none.
	Addr string
	// GID is the peer's global identifier, when the transport uses one.
	GID [16]byte
	// TrafficClass and HopLimit are the GRH fields where they apply.
	TrafficClass uint8
	HopLimit     uint8
}

// QPType is a QP's transport service (ibv_qp_type).
type QPType uint8

// QP types.
const (
	QPTypeRC QPType = iota // reliable connected
	QPTypeUD               // unreliable datagram: SENDs of at most one MTU, each to an address handle
)

func (t QPType) String() string {
	switch t {
	case QPTypeRC:
		return "RC"
	case QPTypeUD:
		return "UD"
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// GRHLen is the size of the Global Route Header a UD receive finds in
// front of every payload, as libibverbs gives it: each UD receive buffer
// needs GRHLen bytes more than the largest message, and the completion's
// ByteLen counts them (its Flags have WCWithGRH).
const GRHLen = 40

// QPCap are the sizes of a QP's queues (ibv_qp_cap).
type QPCap struct {
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// ProviderQPInitAttr are the attributes a provider gets to create a QP
// (ibv_qp_init_attr): QPInitAttr with the CQs resolved to the provider's.
type ProviderQPInitAttr struct {
	Type           QPType
	SendCQ, RecvCQ ProviderCQ
	Cap            QPCap
	// SignalAll makes every send WR signalled (sq_sig_all).
	SignalAll bool
	// SRQ, if not nil, is the shared receive queue the QP takes its
	// receives from; Cap.MaxRecvWR and Cap.MaxRecvSGE are then ignored.
	SRQ ProviderSRQ
}

// SRQAttr are a shared receive queue's attributes (ibv_srq_attr).
type SRQAttr struct {
	// MaxWR is how many receive WRs the SRQ holds; MaxSGE the longest
	// scatter list of one.
	MaxWR  uint32
	MaxSGE uint32
	// Limit, when not zero, arms the limit event: the first time a QP
	// takes a receive that leaves fewer than Limit posted, the device
	// raises EventSRQLimitReached once and Limit returns to zero (armed
	// again only by Modify). At most MaxWR.
	Limit uint32
}

// SRQAttrMask names the attributes of an SRQ Modify (ibv_srq_attr_mask).
type SRQAttrMask uint8

// SRQ attribute mask bits.
const (
	SRQAttrMaxWR SRQAttrMask = 1 << iota // resize the SRQ (IBV_SRQ_MAX_WR)
	SRQAttrLimit                         // arm the limit (IBV_SRQ_LIMIT)
)

// QPAttr are a QP's modifiable attributes (ibv_qp_attr).
type QPAttr struct {
	State    State
	CurState State
	// Access is the remote access the QP allows its peer (qp_access_flags):
	// a region's rights are effective only when the QP grants them too.
	Access    Access
	PKeyIndex uint16
	Port      uint8
	AV        AddressVector
	PathMTU   MTU
	// Timeout is the local ACK timeout exponent: 4.096 µs × 2^Timeout
	// (0 = infinite).
	Timeout uint8
	// RetryCnt is how often a request is resent before RETRY_EXC_ERR.
	RetryCnt uint8
	// RNRRetry is how often a SEND is retried after RNR; 7 = infinite.
	RNRRetry uint8
	RQPSN    uint32
	SQPSN    uint32
	// MaxRdAtomic is the ORD: READ/atomic requests this QP may have
	// outstanding. MaxDestRdAtomic is the IRD: how many it serves at once.
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	// MinRNRTimer is the RNR timer code (IBA table) this QP asks a sender
	// to wait after RNR.
	MinRNRTimer uint8
	DestQPN     uint32
	Cap         QPCap
	// SQDraining reports, in Query, that a QP in SQD still has sends in
	// flight.
	SQDraining bool
	// EnSQDAsyncNotify asks for an event when SQD has drained.
	EnSQDAsyncNotify bool
	// QKey is a UD QP's queue key: a datagram whose DETH carries another
	// is dropped, and a send whose RemoteQKey has the high bit set
	// carries this one instead (IBA 10.2.4).
	QKey uint32
}

var attrNames = [...]string{
	"STATE", "ACCESS_FLAGS", "PKEY_INDEX", "PORT", "AV", "PATH_MTU", "TIMEOUT", "RETRY_CNT",
	"RNR_RETRY", "RQ_PSN", "MAX_QP_RD_ATOMIC", "MIN_RNR_TIMER", "SQ_PSN", "MAX_DEST_RD_ATOMIC",
	"DEST_QPN", "CAP", "CUR_STATE", "EN_SQD_ASYNC_NOTIFY", "QKEY",
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
