// Package verbs is goverbs' public API: RDMA's verbs model (libibverbs and
// librdmacm) in idiomatic Go.
//
// A program opens a Device from a provider value — loopback.New() for QPs in
// one process, or a transport such as iWARP over TCP — allocates a
// protection domain, registers memory, creates completion queues and
// reliable-connected queue pairs, connects them (Listen/Dial, or Modify by
// hand), posts work requests and polls or waits for their completions.
//
// The contracts this package keeps, and a program may rely on:
//
//   - Authorization: a peer reaches memory only through an rkey of a region
//     or window of the QP's protection domain, within its bounds, with the
//     rights it grants and the QP grants. Keys, QP numbers and initial PSNs
//     come from crypto/rand.
//   - Lifetime: a region referenced by posted work cannot be deregistered
//     (ErrBusy); after Deregister returns no peer access reaches it. A PD,
//     CQ or window still used by another object cannot be closed (ErrBusy).
//     Closing twice returns ErrClosed and changes nothing.
//   - Posting is not completing: PostSend and PostRecv queue work and
//     return; every failed WR, and every signalled WR, produces exactly one
//     WorkCompletion, in posting order per queue.
//   - Completion levels are separate claims. Caps.WriteCompletion says what
//     a WRITE's completion proves on the device (local, acknowledged or
//     placed). A receive completion of a SEND or WRITE with immediate proves
//     every earlier WRITE of the QP is placed. Only FLUSH proves global
//     visibility or persistence. Delivery to the peer application is
//     something only the application's own protocol can prove.
//   - Errors: a failing WR completes with a Status from the verbs set and
//     moves the QP to ERR; every outstanding WR then completes with
//     StatusWRFlushErr in posting order. Invalid calls return typed errors
//     (see Err*) that errors.Is also matches against the errno libibverbs
//     would return; nothing panics.
//
// Buffers: the SGE lists of work requests are copied by PostSend and
// PostRecv and not retained; the memory they name belongs to the device
// until the work request completes. Poll fills a slice the caller owns and
// never allocates. To post without allocating, keep the []SendWR and []SGE
// slices across calls.
//
// Concurrency: every method is safe for concurrent use. Completions of one
// CQ are returned in order to whichever goroutine polls.
package verbs

import "github.com/goverbs/goverbs/provider"

// The vocabulary of the API, shared with providers.
type (
	Access          = provider.Access
	Opcode          = provider.Opcode
	OpcodeSet       = provider.OpcodeSet
	SendFlags       = provider.SendFlags
	SGE             = provider.SGE
	RemoteAddr      = provider.RemoteAddr
	SendWR          = provider.SendWR
	RecvWR          = provider.RecvWR
	FlushType       = provider.FlushType
	MWBind          = provider.MWBind
	MWType          = provider.MWType
	WorkCompletion  = provider.WorkCompletion
	Status          = provider.Status
	WCOpcode        = provider.WCOpcode
	WCFlags         = provider.WCFlags
	State           = provider.State
	MTU             = provider.MTU
	AttrMask        = provider.AttrMask
	QPAttr          = provider.QPAttr
	QPCap           = provider.QPCap
	AddressVector   = provider.AddressVector
	Caps            = provider.Caps
	DataPath        = provider.DataPath
	AtomicScope     = provider.AtomicScope
	CompletionLevel = provider.CompletionLevel
	ConnParam       = provider.ConnParam
	ConnInfo        = provider.ConnInfo
	AsyncEvent      = provider.AsyncEvent
	EventType       = provider.EventType
	PostError       = provider.PostError
	CompletionError = provider.CompletionError
	RejectError     = provider.RejectError
	Error           = provider.Error
)

// Access rights.
const (
	AccessLocalWrite      = provider.AccessLocalWrite
	AccessRemoteWrite     = provider.AccessRemoteWrite
	AccessRemoteRead      = provider.AccessRemoteRead
	AccessRemoteAtomic    = provider.AccessRemoteAtomic
	AccessMWBind          = provider.AccessMWBind
	AccessFlushGlobal     = provider.AccessFlushGlobal
	AccessFlushPersistent = provider.AccessFlushPersistent
	// AccessRemote is every remote right: WRITE, READ, atomics and both
	// FLUSH types.
	AccessRemote = provider.AccessRemote
)

// Send opcodes.
const (
	OpSend         = provider.OpSend
	OpSendWithImm  = provider.OpSendWithImm
	OpSendWithInv  = provider.OpSendWithInv
	OpWrite        = provider.OpWrite
	OpWriteWithImm = provider.OpWriteWithImm
	OpRead         = provider.OpRead
	OpCompareSwap  = provider.OpCompareSwap
	OpFetchAdd     = provider.OpFetchAdd
	OpFlush        = provider.OpFlush
	OpAtomicWrite  = provider.OpAtomicWrite
	OpLocalInv     = provider.OpLocalInv
	OpBindMW       = provider.OpBindMW
)

// Send flags.
const (
	SendSignaled  = provider.SendSignaled
	SendFence     = provider.SendFence
	SendInline    = provider.SendInline
	SendSolicited = provider.SendSolicited
)

// FLUSH placement types and selectivity.
const (
	FlushGlobal      = provider.FlushGlobal
	FlushPersistent  = provider.FlushPersistent
	FlushWholeRegion = provider.FlushWholeRegion
)

// Memory window types.
const (
	MWType1 = provider.MWType1
	MWType2 = provider.MWType2
)

// Data paths and atomic scopes.
const (
	DataPathSoftware = provider.DataPathSoftware
	DataPathHardware = provider.DataPathHardware
	AtomicNone       = provider.AtomicNone
	AtomicDevice     = provider.AtomicDevice
	AtomicGlobal     = provider.AtomicGlobal

	CompletionLocal  = provider.CompletionLocal
	CompletionAcked  = provider.CompletionAcked
	CompletionPlaced = provider.CompletionPlaced
)

// Work completion statuses.
const (
	StatusSuccess        = provider.StatusSuccess
	StatusLocLenErr      = provider.StatusLocLenErr
	StatusLocQPOpErr     = provider.StatusLocQPOpErr
	StatusLocProtErr     = provider.StatusLocProtErr
	StatusWRFlushErr     = provider.StatusWRFlushErr
	StatusMWBindErr      = provider.StatusMWBindErr
	StatusBadRespErr     = provider.StatusBadRespErr
	StatusLocAccessErr   = provider.StatusLocAccessErr
	StatusRemInvReqErr   = provider.StatusRemInvReqErr
	StatusRemAccessErr   = provider.StatusRemAccessErr
	StatusRemOpErr       = provider.StatusRemOpErr
	StatusRetryExcErr    = provider.StatusRetryExcErr
	StatusRNRRetryExcErr = provider.StatusRNRRetryExcErr
	StatusRemAbortErr    = provider.StatusRemAbortErr
	StatusFatalErr       = provider.StatusFatalErr
	StatusRespTimeoutErr = provider.StatusRespTimeoutErr
	StatusGeneralErr     = provider.StatusGeneralErr
)

// Work completion opcodes and flags.
const (
	WCSend        = provider.WCSend
	WCWrite       = provider.WCWrite
	WCRead        = provider.WCRead
	WCCompareSwap = provider.WCCompareSwap
	WCFetchAdd    = provider.WCFetchAdd
	WCBindMW      = provider.WCBindMW
	WCLocalInv    = provider.WCLocalInv
	WCFlush       = provider.WCFlush
	WCAtomicWrite = provider.WCAtomicWrite
	WCRecv        = provider.WCRecv
	WCRecvRDMAImm = provider.WCRecvRDMAImm

	WCWithImm   = provider.WCWithImm
	WCWithInv   = provider.WCWithInv
	WCSolicited = provider.WCSolicited
)

// QP states.
const (
	StateReset = provider.StateReset
	StateInit  = provider.StateInit
	StateRTR   = provider.StateRTR
	StateRTS   = provider.StateRTS
	StateSQD   = provider.StateSQD
	StateSQE   = provider.StateSQE
	StateErr   = provider.StateErr
)

// QP attribute mask bits.
const (
	AttrState            = provider.AttrState
	AttrAccessFlags      = provider.AttrAccessFlags
	AttrPKeyIndex        = provider.AttrPKeyIndex
	AttrPort             = provider.AttrPort
	AttrAV               = provider.AttrAV
	AttrPathMTU          = provider.AttrPathMTU
	AttrTimeout          = provider.AttrTimeout
	AttrRetryCnt         = provider.AttrRetryCnt
	AttrRNRRetry         = provider.AttrRNRRetry
	AttrRQPSN            = provider.AttrRQPSN
	AttrMaxQPRdAtomic    = provider.AttrMaxQPRdAtomic
	AttrMinRNRTimer      = provider.AttrMinRNRTimer
	AttrSQPSN            = provider.AttrSQPSN
	AttrMaxDestRdAtomic  = provider.AttrMaxDestRdAtomic
	AttrDestQPN          = provider.AttrDestQPN
	AttrCap              = provider.AttrCap
	AttrCurState         = provider.AttrCurState
	AttrEnSQDAsyncNotify = provider.AttrEnSQDAsyncNotify
)

// Asynchronous event types.
const (
	EventCQError          = provider.EventCQError
	EventQPFatal          = provider.EventQPFatal
	EventQPRequestErr     = provider.EventQPRequestErr
	EventQPAccessErr      = provider.EventQPAccessErr
	EventCommEstablished  = provider.EventCommEstablished
	EventQPLastWQEReached = provider.EventQPLastWQEReached
	EventPeerDisconnected = provider.EventPeerDisconnected
	EventDeviceFatal      = provider.EventDeviceFatal
)

// Errors. Each matches, with errors.Is, both itself and the errno
// libibverbs returns for the same condition (EINVAL, ENOMEM, EBUSY, ...).
var (
	ErrInvalidArgument = provider.ErrInvalidArgument
	ErrInvalidState    = provider.ErrInvalidState
	ErrQueueFull       = provider.ErrQueueFull
	ErrTooManySGE      = provider.ErrTooManySGE
	ErrInlineTooLong   = provider.ErrInlineTooLong
	ErrLimit           = provider.ErrLimit
	ErrBusy            = provider.ErrBusy
	ErrClosed          = provider.ErrClosed
	ErrNotSupported    = provider.ErrNotSupported
	ErrCQOverrun       = provider.ErrCQOverrun
	ErrRejected        = provider.ErrRejected
	ErrTimeout         = provider.ErrTimeout
	ErrDisconnected    = provider.ErrDisconnected
	ErrProtocol        = provider.ErrProtocol
)

// RNRRetryForever is the rnr_retry value that retries a receiver-not-ready
// SEND forever.
const RNRRetryForever = 7
