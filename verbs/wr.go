package verbs

import "strings"

// Access is a set of access rights of a memory region, memory window or QP
// (ibv_access_flags).
type Access uint32

// Access rights. RemoteWrite and RemoteAtomic require LocalWrite on a
// memory region (SEMANTICS 3).
const (
	AccessLocalWrite      Access = 1 << iota // the local side may write (receives, READ and atomic results)
	AccessRemoteWrite                        // peers may RDMA WRITE and ATOMIC WRITE
	AccessRemoteRead                         // peers may RDMA READ
	AccessRemoteAtomic                       // peers may compare-and-swap and fetch-and-add
	AccessMWBind                             // memory windows may be bound to the region
	AccessFlushGlobal                        // peers may FLUSH to global visibility
	AccessFlushPersistent                    // peers may FLUSH to persistence

	// AccessRemote is every remote right a QP can grant.
	AccessRemote = AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic |
		AccessFlushGlobal | AccessFlushPersistent
	accessAll = AccessLocalWrite | AccessRemote | AccessMWBind
)

var accessNames = []struct {
	a    Access
	name string
}{
	{AccessLocalWrite, "local-write"},
	{AccessRemoteWrite, "remote-write"},
	{AccessRemoteRead, "remote-read"},
	{AccessRemoteAtomic, "remote-atomic"},
	{AccessMWBind, "mw-bind"},
	{AccessFlushGlobal, "flush-global"},
	{AccessFlushPersistent, "flush-persistent"},
}

// Valid reports whether a holds only defined rights.
func (a Access) Valid() bool { return a&^accessAll == 0 }

// Has reports whether a includes every right of b.
func (a Access) Has(b Access) bool { return a&b == b }

func (a Access) String() string {
	if a == 0 {
		return "none"
	}
	var parts []string
	for _, n := range accessNames {
		if a&n.a != 0 {
			parts = append(parts, n.name)
		}
	}
	if rest := a &^ accessAll; rest != 0 {
		parts = append(parts, "unknown")
	}
	return strings.Join(parts, "|")
}

// Opcode is the operation of a send work request (ibv_wr_opcode).
type Opcode uint8

// Send work request opcodes.
const (
	OpSend         Opcode = iota // SEND: consumes one receive at the peer
	OpSendWithImm                // SEND with 32-bit immediate data
	OpSendWithInv                // SEND that invalidates the peer's rkey InvalidateRKey
	OpWrite                      // RDMA WRITE to (Remote.Addr, Remote.RKey)
	OpWriteWithImm               // RDMA WRITE that also consumes a receive and delivers Imm
	OpRead                       // RDMA READ from (Remote.Addr, Remote.RKey) into the SGL
	OpCompareSwap                // 8-byte compare-and-swap; the original value goes to the SGL
	OpFetchAdd                   // 8-byte fetch-and-add; the original value goes to the SGL
	OpFlush                      // FLUSH earlier WRITEs to global visibility or persistence
	OpAtomicWrite                // 8-byte atomic WRITE of Swap
	OpLocalInv                   // invalidate the local rkey InvalidateRKey
	OpBindMW                     // bind a type 2 memory window (Bind)
	numOpcodes
)

var opcodeNames = [...]string{
	OpSend:         "SEND",
	OpSendWithImm:  "SEND_WITH_IMM",
	OpSendWithInv:  "SEND_WITH_INV",
	OpWrite:        "RDMA_WRITE",
	OpWriteWithImm: "RDMA_WRITE_WITH_IMM",
	OpRead:         "RDMA_READ",
	OpCompareSwap:  "ATOMIC_CMP_AND_SWP",
	OpFetchAdd:     "ATOMIC_FETCH_AND_ADD",
	OpFlush:        "FLUSH",
	OpAtomicWrite:  "ATOMIC_WRITE",
	OpLocalInv:     "LOCAL_INV",
	OpBindMW:       "BIND_MW",
}

func (o Opcode) String() string { return nameOf(opcodeNames[:], o, "UNKNOWN_OPCODE") }

// Valid reports whether o is a defined opcode.
func (o Opcode) Valid() bool { return o < numOpcodes }

// IsSend reports whether o consumes a receive at the peer.
func (o Opcode) IsSend() bool {
	return o == OpSend || o == OpSendWithImm || o == OpSendWithInv || o == OpWriteWithImm
}

// IsAtomic reports whether o is compare-and-swap or fetch-and-add.
func (o Opcode) IsAtomic() bool { return o == OpCompareSwap || o == OpFetchAdd }

// IsRemote reports whether o targets the peer's memory through an rkey.
func (o Opcode) IsRemote() bool {
	switch o {
	case OpWrite, OpWriteWithImm, OpRead, OpCompareSwap, OpFetchAdd, OpFlush, OpAtomicWrite:
		return true
	}
	return false
}

// UsesResponderResources reports whether o occupies one of the peer's
// responder resources (IRD) while outstanding, and so counts against ORD.
func (o Opcode) UsesResponderResources() bool {
	switch o {
	case OpRead, OpCompareSwap, OpFetchAdd, OpFlush, OpAtomicWrite:
		return true
	}
	return false
}

// HasImm reports whether o carries immediate data.
func (o Opcode) HasImm() bool { return o == OpSendWithImm || o == OpWriteWithImm }

// Set is a set of opcodes, as reported in Caps.
type OpcodeSet uint32

// Has reports whether o is in the set.
func (s OpcodeSet) Has(o Opcode) bool { return s&(1<<o) != 0 }

// With returns s with the given opcodes added.
func (s OpcodeSet) With(ops ...Opcode) OpcodeSet {
	for _, o := range ops {
		s |= 1 << o
	}
	return s
}

// Without returns s without the given opcodes.
func (s OpcodeSet) Without(ops ...Opcode) OpcodeSet {
	for _, o := range ops {
		s &^= 1 << o
	}
	return s
}

// AllOpcodes is the set of every defined opcode.
const AllOpcodes OpcodeSet = 1<<numOpcodes - 1

func (s OpcodeSet) String() string {
	var parts []string
	for o := Opcode(0); o < numOpcodes; o++ {
		if s.Has(o) {
			parts = append(parts, o.String())
		}
	}
	return strings.Join(parts, " ")
}

// SendFlags modify a send work request (ibv_send_flags).
type SendFlags uint8

// Send flags.
const (
	// SendSignaled asks for a completion on success. Without it a WR
	// completes silently unless it fails (or the QP signals every WR).
	SendSignaled SendFlags = 1 << iota
	// SendFence makes the WR wait until every earlier READ and atomic on
	// the QP has completed.
	SendFence
	// SendInline copies the payload into the WR at post time: the SGL's
	// memory may be reused as soon as PostSend returns. Its lkeys still
	// name the registered memory the payload is read from (goverbs reads
	// no memory but a region's), so a bad one completes the WR with
	// StatusLocProtErr, as for any send.
	SendInline
	// SendSolicited asks the peer's CQ to wake a solicited-only waiter.
	SendSolicited
)

// SGE is a scatter/gather element: Length bytes at virtual address Addr
// inside the region of LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// RemoteAddr names remote memory: a virtual address inside the region or
// window of RKey.
type RemoteAddr struct {
	Addr uint64
	RKey uint32
}

// FlushType is the placement type and selectivity of a FLUSH (IBTA 1.5 FETH).
type FlushType uint8

// Flush placement types and selectivity.
const (
	FlushGlobal     FlushType = 1 << iota // bytes are globally visible at the target
	FlushPersistent                       // bytes are durable at the target
	// FlushWholeRegion flushes the whole region of Remote.RKey instead of
	// the range [Remote.Addr, Remote.Addr+Length of the WR).
	FlushWholeRegion
)

// MWBind describes a memory window binding.
type MWBind struct {
	// MWRKey is the window's rkey before the bind (type 2, as posted in a
	// BIND_MW work request); the bind gives the window a new key.
	MWRKey uint32
	// MRLKey names the region the window is bound into.
	MRLKey uint32
	Addr   uint64
	Length uint64
	// Access is the remote access the window grants: its own, not bounded
	// by the region's remote rights (IBA 10.6.7.2.2, as on hardware). The
	// region must allow binding (AccessMWBind), and a window that grants
	// remote write or atomics needs a region with AccessLocalWrite. A
	// region registered for local access and binding only is thus exposed
	// through its windows alone.
	Access Access
}

// SendWR is a send work request (ibv_send_wr). The provider copies it at
// post time; SGL is not retained.
type SendWR struct {
	ID     uint64
	Opcode Opcode
	Flags  SendFlags
	// SGL is the local memory: the payload of SEND and WRITE, the
	// destination of READ, the 8-byte result of an atomic.
	SGL []SGE
	// Imm is the immediate data of *_WITH_IMM opcodes.
	Imm uint32
	// InvalidateRKey is the rkey SEND_WITH_INV invalidates at the peer,
	// or LOCAL_INV invalidates locally.
	InvalidateRKey uint32
	// Remote is the target of WRITE, READ, atomics, FLUSH and ATOMIC
	// WRITE.
	Remote RemoteAddr
	// CompareAdd is the compare value of compare-and-swap and the addend
	// of fetch-and-add; Swap is the swap value of compare-and-swap and
	// the value of ATOMIC WRITE.
	CompareAdd, Swap uint64
	// Flush selects the placement type of FLUSH; FlushLength is the
	// length of the flushed range.
	Flush       FlushType
	FlushLength uint64
	// Bind describes the binding of BIND_MW.
	Bind MWBind
	// AH, RemoteQPN and RemoteQKey address the datagram of a SEND on a
	// UD QP (ibv_send_wr.wr.ud). A RemoteQKey with the high bit set
	// sends the QP's own Q_Key instead (IBA 10.2.4).
	AH         *AddressHandle
	RemoteQPN  uint32
	RemoteQKey uint32
}

// AddressHandle is the address of a UD peer (ibv_ah), made by
// PD.CreateAH. Providers resolve its AddressVector once, at creation.
type AddressHandle struct {
	av       AddressVector
	resolved any
}

// AV returns the address the handle was created with.
func (ah *AddressHandle) AV() AddressVector { return ah.av }

// Resolved returns what the provider's CreateAH made of the address (for
// RoCE a UDP address), or nil for providers without ProviderAHCreator.
func (ah *AddressHandle) Resolved() any { return ah.resolved }

// RecvWR is a receive work request (ibv_recv_wr).
type RecvWR struct {
	ID  uint64
	SGL []SGE
}
