package verbs

import "fmt"

// DataPath says who moves the bytes.
type DataPath uint8

// Data paths.
const (
	// DataPathSoftware: a CPU runs the RDMA engine. On a network link the
	// remote "adapter" is the remote host's CPU.
	DataPathSoftware DataPath = iota + 1
	// DataPathHardware: an RDMA NIC moves the bytes.
	DataPathHardware
)

var dataPathNames = [...]string{DataPathSoftware: "software", DataPathHardware: "hardware"}

func (d DataPath) String() string { return nameOf(dataPathNames[:], d, "unknown") }

// AtomicScope says what an atomic operation is atomic against
// (ibv_atomic_cap).
type AtomicScope uint8

// Atomic scopes.
const (
	AtomicNone AtomicScope = iota // no atomics
	// AtomicDevice: atomic against other atomics through the same device
	// (IBV_ATOMIC_HCA), not against the CPU.
	AtomicDevice
	// AtomicGlobal: atomic against every atomic access to the memory,
	// including the owner's own CPU atomics (IBV_ATOMIC_GLOB).
	AtomicGlobal
)

var atomicScopeNames = [...]string{AtomicNone: "none", AtomicDevice: "device", AtomicGlobal: "global"}

func (a AtomicScope) String() string { return nameOf(atomicScopeNames[:], a, "none") }

// DirectAccess says which registered regions a peer's one-sided
// operations (READ, WRITE, atomics, FLUSH) reach without this process's
// CPU. MR.DirectRemoteAccess answers for one region.
type DirectAccess uint8

// Direct access.
const (
	// DirectNone: this process's transport engine serves every peer
	// access with its own CPU (the software transports over a network:
	// iwarp, roce).
	DirectNone DirectAccess = iota
	// DirectShareable: regions over shareable memory (mem.Alloc,
	// mem.MapFile) that grant a remote right are worked on by the
	// same-host peer itself, on its own mapping; regions over Go memory
	// are served by this process's engine (shm).
	DirectShareable
	// DirectAll: an RDMA NIC does the work for every region.
	DirectAll
)

func (d DirectAccess) String() string {
	switch d {
	case DirectNone:
		return "none: this process's engine serves every peer access"
	case DirectShareable:
		return "regions over mem.Alloc or mem.MapFile memory (the peer works on its own mapping); Go memory is served by this process's engine"
	case DirectAll:
		return "every region (the NIC)"
	}
	return fmt.Sprintf("DirectAccess(%d)", uint8(d))
}

// CompletionLevel is what a successful send-side completion of a WRITE
// proves (ARCHITECTURE: "completion levels are separate claims").
type CompletionLevel uint8

// Completion levels, weakest first.
const (
	// CompletionLocal: the source buffer may be reused; the bytes may still
	// be in flight (iWARP: handed to TCP).
	CompletionLocal CompletionLevel = iota + 1
	// CompletionAcked: the peer acknowledged receipt; placement in its
	// memory follows (RoCE: transport ACK).
	CompletionAcked
	// CompletionPlaced: the bytes are in the target region and visible to
	// the target's CPU.
	CompletionPlaced
)

var completionLevelNames = [...]string{
	CompletionLocal:  "local (source reusable; not yet placed)",
	CompletionAcked:  "acknowledged by the peer (placement follows; FLUSH to confirm)",
	CompletionPlaced: "placed (bytes visible in the target region)",
}

func (c CompletionLevel) String() string { return nameOf(completionLevelNames[:], c, "unknown") }

// Caps are a device's capabilities (ibv_device_attr and more). Every field
// is a promise the conformance suite checks.
type Caps struct {
	// Name names the device ("loopback0", "iwarp0", ...).
	Name string
	// Transport names the wire ("loopback", "iwarp", "roce", "shm",
	// "fabric:tcp", ...).
	Transport string
	DataPath  DataPath

	MaxMRSize       uint64
	MaxMR           uint32
	MaxPD           uint32
	MaxMW           uint32
	MaxQP           uint32
	MaxQPWR         uint32
	MaxSGE          uint32
	MaxInlineData   uint32
	MaxCQ           uint32
	MaxCQE          uint32
	MaxQPRdAtom     uint8 // largest ORD a QP may use
	MaxQPInitRdAtom uint8 // largest IRD a QP may offer
	MaxMsgSize      uint64
	MaxPrivateData  int // longest connection private data
	// UD reports whether the device creates QPTypeUD queue pairs.
	UD bool
	// MaxSRQ is how many shared receive queues the device creates (0:
	// none; PD.CreateSRQ fails with ErrNotSupported); MaxSRQWR and
	// MaxSRQSGE bound each one's depth and scatter list
	// (ibv_device_attr's max_srq, max_srq_wr, max_srq_sge).
	MaxSRQ    uint32
	MaxSRQWR  uint32
	MaxSRQSGE uint32

	// Opcodes are the send opcodes the device executes; others fail at
	// post time with ErrNotSupported.
	Opcodes     OpcodeSet
	AtomicScope AtomicScope
	// WriteCompletion is what a WRITE's successful completion proves.
	WriteCompletion CompletionLevel
	// Persistence reports whether FLUSH to persistence is served (for
	// regions backed by a file).
	Persistence bool
	// ManualConnect reports whether a QP can be connected by Modify with an
	// address vector and the peer's QPN, without the connection manager.
	ManualConnect bool
	// RNRRetry reports whether a SEND that finds no receive is retried
	// (InfiniBand RNR NAK); when false, RNRRule says what happens instead.
	RNRRetry bool
	RNRRule  string
	// DirectAccess says which regions peers reach without this process's
	// CPU (see MR.DirectRemoteAccess for one region).
	DirectAccess DirectAccess

	PathMTU MTU
	// LinkSpeed is in bits per second; zero when unknown.
	LinkSpeed uint64
}

// CQAttr are the attributes of a new completion queue.
type CQAttr struct {
	// Entries is the number of completions the CQ holds (cqe).
	Entries int
}

// MWType is a memory window's type.
type MWType uint8

// Memory window types.
const (
	// MWType1 windows are bound by a call (ibv_bind_mw) and invalidated
	// only by binding them again with zero length or by deallocation.
	MWType1 MWType = 1
	// MWType2 windows are bound by a BIND_MW work request on one QP and
	// invalidated by LOCAL_INV or a peer's SEND_WITH_INV.
	MWType2 MWType = 2
)
