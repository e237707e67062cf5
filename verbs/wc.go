package verbs

import "fmt"

// Status is the outcome of a work request (ibv_wc_status). The numeric
// values are libibverbs'.
type Status uint8

// Work completion statuses.
const (
	StatusSuccess        Status = 0  // the WR completed
	StatusLocLenErr      Status = 1  // local length error: a message did not fit the receive, or an SGE list is too long
	StatusLocQPOpErr     Status = 2  // local QP operation error: the WR cannot be executed on this QP
	StatusLocProtErr     Status = 4  // local protection error: bad lkey, bounds or rights on local memory
	StatusWRFlushErr     Status = 5  // the QP entered ERR before the WR completed: a WR still queued was not executed; one already sent may have been, its acknowledgement not yet in (as on every RDMA device)
	StatusMWBindErr      Status = 6  // memory window bind error
	StatusBadRespErr     Status = 7  // the peer's response was unexpected or malformed
	StatusLocAccessErr   Status = 8  // local access error (e.g. the receive buffer lacks local write)
	StatusRemInvReqErr   Status = 9  // remote invalid request: the peer found the request invalid
	StatusRemAccessErr   Status = 10 // remote access error: bad rkey, bounds, rights or alignment at the peer
	StatusRemOpErr       Status = 11 // remote operation error: the peer could not complete the request
	StatusRetryExcErr    Status = 12 // transport retry counter exceeded: the peer did not answer
	StatusRNRRetryExcErr Status = 13 // RNR retry counter exceeded: the peer had no receive posted
	StatusRemAbortErr    Status = 16 // the peer aborted the operation
	StatusFatalErr       Status = 19 // fatal error of the device or transport
	StatusRespTimeoutErr Status = 20 // response timeout
	StatusGeneralErr     Status = 21 // general error
)

var statusNames = map[Status]string{
	StatusSuccess:        "success",
	StatusLocLenErr:      "local length error",
	StatusLocQPOpErr:     "local QP operation error",
	StatusLocProtErr:     "local protection error",
	StatusWRFlushErr:     "work request flushed error",
	StatusMWBindErr:      "memory bind operation error",
	StatusBadRespErr:     "bad response error",
	StatusLocAccessErr:   "local access error",
	StatusRemInvReqErr:   "remote invalid request error",
	StatusRemAccessErr:   "remote access error",
	StatusRemOpErr:       "remote operation error",
	StatusRetryExcErr:    "transport retry counter exceeded",
	StatusRNRRetryExcErr: "RNR retry counter exceeded",
	StatusRemAbortErr:    "remote aborted error",
	StatusFatalErr:       "fatal error",
	StatusRespTimeoutErr: "response timeout error",
	StatusGeneralErr:     "general error",
}

// String returns the status as ibv_wc_status_str spells it.
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("unknown status %d", uint8(s))
}

// WCOpcode is the operation a work completion reports (ibv_wc_opcode).
type WCOpcode uint8

// Work completion opcodes.
const (
	WCSend WCOpcode = iota
	WCWrite
	WCRead
	WCCompareSwap
	WCFetchAdd
	WCBindMW
	WCLocalInv
	WCFlush
	WCAtomicWrite
	WCRecv        // a SEND arrived
	WCRecvRDMAImm // a WRITE with immediate arrived
	numWCOpcodes
)

var wcOpcodeNames = [...]string{
	WCSend:        "SEND",
	WCWrite:       "RDMA_WRITE",
	WCRead:        "RDMA_READ",
	WCCompareSwap: "COMP_SWAP",
	WCFetchAdd:    "FETCH_ADD",
	WCBindMW:      "BIND_MW",
	WCLocalInv:    "LOCAL_INV",
	WCFlush:       "FLUSH",
	WCAtomicWrite: "ATOMIC_WRITE",
	WCRecv:        "RECV",
	WCRecvRDMAImm: "RECV_RDMA_WITH_IMM",
}

func (o WCOpcode) String() string { return nameOf(wcOpcodeNames[:], o, "UNKNOWN") }

// IsRecv reports whether o is the completion of a receive WR.
func (o WCOpcode) IsRecv() bool { return o == WCRecv || o == WCRecvRDMAImm }

// CompletionOpcode returns the completion opcode for a send opcode.
func (o Opcode) CompletionOpcode() WCOpcode {
	switch o {
	case OpWrite, OpWriteWithImm:
		return WCWrite
	case OpRead:
		return WCRead
	case OpCompareSwap:
		return WCCompareSwap
	case OpFetchAdd:
		return WCFetchAdd
	case OpFlush:
		return WCFlush
	case OpAtomicWrite:
		return WCAtomicWrite
	case OpLocalInv:
		return WCLocalInv
	case OpBindMW:
		return WCBindMW
	}
	return WCSend
}

// WCFlags qualify a work completion (ibv_wc_flags).
type WCFlags uint8

// Work completion flags.
const (
	WCWithImm   WCFlags = 1 << iota // Imm holds immediate data
	WCWithInv                       // InvalidatedRKey was invalidated by the SEND
	WCSolicited                     // the sender asked for a solicited event
	WCWithGRH                       // a UD receive: the buffer starts with the 40-byte GRH
)

// WorkCompletion is the completion of one work request (ibv_wc).
type WorkCompletion struct {
	// ID is the ID of the completed work request (SendWR.ID, RecvWR.ID).
	ID     uint64
	Status Status
	// Opcode is valid for successful completions; flushed completions
	// carry the opcode of the WR where it is known.
	Opcode WCOpcode
	Flags  WCFlags
	// QPN is the local QP the WR was posted on.
	QPN uint32
	// ByteLen is the number of bytes received (receive completions) or
	// transferred (READ, atomics).
	ByteLen uint32
	// Imm is the immediate data when Flags has WCWithImm.
	Imm uint32
	// InvalidatedRKey is the rkey a SEND_WITH_INV invalidated.
	InvalidatedRKey uint32
	// SrcQP is the sender's QP number of a UD receive.
	SrcQP uint32
	// VendorErr carries transport detail for failed completions (for
	// example an iWARP Terminate's layer, type and code).
	VendorErr uint32
}

// Err returns nil for a successful completion and a *CompletionError
// otherwise.
func (wc *WorkCompletion) Err() error {
	if wc.Status == StatusSuccess {
		return nil
	}
	return &CompletionError{ID: wc.ID, QPN: wc.QPN, Opcode: wc.Opcode, Status: wc.Status, VendorErr: wc.VendorErr}
}
