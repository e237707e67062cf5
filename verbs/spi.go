package verbs

import "context"

// Provider opens a device. A transport package returns a Provider value (for
// example loopback.New()); verbs.Open calls Open exactly once per device.
type Provider interface {
	Open() (ProviderDevice, error)
}

// Device is an open RDMA device: the factory of every other object.
type ProviderDevice interface {
	// Caps reports the device's capabilities truthfully (SEMANTICS 1).
	Caps() Caps
	// AllocPD allocates a protection domain.
	AllocPD() (ProviderPD, error)
	// CreateCQ creates a completion queue with room for attr.Entries work
	// completions.
	CreateCQ(attr CQAttr) (ProviderCQ, error)
	// Listen starts accepting connection requests on addr, whose syntax
	// belongs to the transport (host:port for TCP and UDP, a socket path
	// for shared memory, a name for loopback).
	Listen(addr string) (ProviderListener, error)
	// Dial connects qp (in RESET or INIT) to a listener at addr. On
	// success qp is in RTS, connected to the QP the peer accepted with.
	Dial(ctx context.Context, addr string, qp ProviderQP, param ConnParam) (ConnInfo, error)
	// Events returns the channel on which asynchronous events (CQ overrun,
	// QP fatal error, communication established, ...) are delivered. The
	// channel is closed when the device is closed.
	Events() <-chan AsyncEvent
	// Close releases every object of the device: QPs move to ERR and are
	// destroyed, connections are closed, memory is deregistered.
	Close() error
}

// PD is a protection domain: memory regions and QPs of one PD can reach each
// other; a remote key never reaches a region of another PD.
type ProviderPD interface {
	// RegisterMR registers buf. The provider keeps buf reachable and
	// reads and writes it directly until the region is deregistered.
	// mem, if not nil, is the allocator-owned backing of buf (it enables
	// persistence and sharing with a same-host peer).
	RegisterMR(buf []byte, access Access, mem ProviderMemory) (ProviderMR, error)
	// CreateQP creates a reliable-connected queue pair in RESET.
	CreateQP(attr ProviderQPInitAttr) (ProviderQP, error)
	// AllocMW allocates a memory window of the given type.
	AllocMW(typ MWType) (ProviderMW, error)
	// Close deallocates the PD. The verbs layer guarantees no MR, MW or
	// QP of the PD is still open.
	Close() error
}

// ProviderAHCreator is implemented by the PDs of providers with UD QPs:
// CreateAH checks and resolves an address once (ibv_create_ah), and the
// result travels in every SendWR that names the handle.
type ProviderAHCreator interface {
	CreateAH(av AddressVector) (resolved any, err error)
}

// ProviderSRQCreator is implemented by the PDs of providers with shared
// receive queues (Caps.MaxSRQ > 0): CreateSRQ is ibv_create_srq.
type ProviderSRQCreator interface {
	CreateSRQ(attr SRQAttr) (ProviderSRQ, error)
}

// ProviderSRQ is a shared receive queue: receive WRs that any QP created on
// it (ProviderQPInitAttr.SRQ) consumes, in posting order, one per incoming
// SEND or WRITE with immediate. A receive completes into the CQ of the QP
// that consumed it, with that QP's number.
type ProviderSRQ interface {
	// SRQN names the SRQ in asynchronous events (AsyncEvent.SRQN).
	SRQN() uint32
	// PostRecv queues receive WRs with QP.PostRecv's all-or-nothing rule.
	PostRecv(wrs []RecvWR) error
	// Modify applies the attributes mask names: SRQAttrLimit arms the
	// limit event (zero disarms it).
	Modify(attr *SRQAttr, mask SRQAttrMask) error
	// Query returns the SRQ's attributes; Limit is zero once the limit
	// event fired.
	Query() (SRQAttr, error)
	// Close destroys the SRQ. The verbs layer guarantees no QP uses it;
	// the WRs still posted are dropped without a completion.
	Close() error
}

// Memory is the part of an allocator-owned buffer (package mem) a provider
// may use: persistence for FLUSH and a shareable file descriptor.
type ProviderMemory interface {
	// Persistent reports whether Persist makes bytes durable.
	Persistent() bool
	// Persist makes the byte range [off, off+n) durable.
	Persist(off, n int) error
	// Fd returns a file descriptor a same-host peer can map, or an error.
	Fd() (int, error)
	// Acquire and Release hold the memory open (Close fails while held).
	Acquire() error
	Release()
}

// MR is a registered memory region.
type ProviderMR interface {
	LKey() uint32
	RKey() uint32
	// Addr is the region's virtual address: the address an SGE or a
	// remote peer uses for the first byte.
	Addr() uint64
	Len() int
	Access() Access
	// Deregister revokes both keys before it returns. It fails with
	// ErrBusy while posted work requests still reference the region, and
	// waits for remote accesses already under way (they are bounded).
	Deregister() error
}

// MW is a memory window: a remotely accessible view of part of an MR that can
// be bound, invalidated and bound again with a new key.
type ProviderMW interface {
	Type() MWType
	// RKey is the window's current remote key (zero when unbound).
	RKey() uint32
	// Bind binds a type 1 window through qp (which must be in RTS).
	Bind(qp ProviderQP, bind MWBind) (rkey uint32, err error)
	Close() error
}

// CQ is a completion queue.
type ProviderCQ interface {
	// Poll copies up to len(wc) completions, oldest first, into wc and
	// returns how many. It never blocks and never allocates. After an
	// overrun it returns the completions it still holds, then ErrCQOverrun.
	Poll(wc []WorkCompletion) (int, error)
	// Wait blocks until the CQ holds a completion (a solicited one or an
	// error, if solicitedOnly) or ctx ends.
	Wait(ctx context.Context, solicitedOnly bool) error
	Close() error
}

// QP is a reliable-connected queue pair.
type ProviderQP interface {
	QPN() uint32
	// Modify applies the attributes named by mask, moving the QP to
	// attr.State when mask has AttrState. An illegal transition or a
	// missing required attribute fails and leaves the QP unchanged.
	Modify(attr *QPAttr, mask AttrMask) error
	// Query returns the QP's current attributes.
	Query() (QPAttr, error)
	// PostSend queues wrs in order. It validates every WR before queuing
	// any: on error nothing is queued and the error is a *PostError.
	PostSend(wrs []SendWR) error
	// PostRecv queues receive WRs, with the same all-or-nothing rule.
	PostRecv(wrs []RecvWR) error
	// Disconnect tells the peer the connection ends and moves the QP to
	// ERR, flushing outstanding work.
	Disconnect() error
	// Close destroys the QP; outstanding work is flushed first.
	Close() error
}

// Listener accepts connection requests.
type ProviderListener interface {
	// Accept waits for the next connection request.
	Accept(ctx context.Context) (ProviderConnRequest, error)
	// Addr is the address peers dial.
	Addr() string
	Close() error
}

// ConnRequest is an incoming connection request, answered by Accept or
// Reject exactly once. A request the transport can answer itself (its
// dialer gives up, it expires) should also have a method Pending() bool,
// false from then on: the device then forgets such a request that its
// user dropped unanswered, where otherwise it keeps it until Close rejects
// it.
type ProviderConnRequest interface {
	// PrivateData is the initiator's private data.
	PrivateData() []byte
	// Param is the initiator's offer (IRD, ORD, ...).
	Param() ConnParam
	// Accept connects qp (in RESET or INIT) to the initiator and moves it
	// to RTS.
	Accept(ctx context.Context, qp ProviderQP, param ConnParam) (ConnInfo, error)
	// Reject refuses the request, sending privateData to the initiator.
	Reject(privateData []byte) error
}

// ConnParam is what one side offers when connecting or accepting
// (librdmacm's rdma_conn_param).
type ConnParam struct {
	// PrivateData travels to the peer; each transport documents its limit
	// (Caps.MaxPrivateData).
	PrivateData []byte
	// ResponderResources is the IRD offered: how many RDMA READ and atomic
	// requests this side accepts outstanding.
	ResponderResources uint8
	// InitiatorDepth is the ORD asked for: how many READ/atomic requests
	// this side will have outstanding.
	InitiatorDepth uint8
	// RNRRetryCount (0-7, 7 = infinite) and RetryCount (0-7) are applied to
	// the QP where the transport has them.
	RNRRetryCount uint8
	RetryCount    uint8
}

// DefaultConnDepth is the IRD and ORD a zero ConnParam asks for, as
// rdma_cm's users commonly set them.
const DefaultConnDepth = 16

// WithDefaults fills p's zero fields, as a connection manager does before
// it sends p: IRD and ORD DefaultConnDepth, clamped to what the device c
// supports, and retry counts 7 (for RNR, forever); retry counts above 7
// become 7.
func (p ConnParam) WithDefaults(c Caps) ConnParam {
	if p.ResponderResources == 0 {
		p.ResponderResources = DefaultConnDepth
	}
	if p.InitiatorDepth == 0 {
		p.InitiatorDepth = DefaultConnDepth
	}
	p.ResponderResources = min(p.ResponderResources, c.MaxQPInitRdAtom)
	p.InitiatorDepth = min(p.InitiatorDepth, c.MaxQPRdAtom)
	if p.RetryCount == 0 {
		p.RetryCount = 7
	}
	if p.RNRRetryCount == 0 {
		p.RNRRetryCount = 7
	}
	p.RetryCount, p.RNRRetryCount = min(p.RetryCount, 7), min(p.RNRRetryCount, 7)
	return p
}

// ConnInfo describes an established connection.
type ConnInfo struct {
	// PrivateData is what the peer sent with its accept.
	PrivateData []byte
	// LocalAddr and RemoteAddr are transport addresses.
	LocalAddr, RemoteAddr string
	// RemoteQPN is the peer QP's number.
	RemoteQPN uint32
	// IRD and ORD are the negotiated values applied to the QP.
	IRD, ORD uint8
}

// AsyncEvent is an asynchronous event (ibv_async_event).
type AsyncEvent struct {
	Type EventType
	// QPN names the QP for QP events; zero otherwise.
	QPN uint32
	// SRQN names the shared receive queue of EventSRQLimitReached.
	SRQN uint32
	// Err gives detail when there is any.
	Err error
}

// EventType is the kind of an AsyncEvent.
type EventType uint8

// Asynchronous event types.
const (
	EventCQError          EventType = iota + 1 // a CQ overran
	EventQPFatal                               // a QP moved to ERR because of a local or transport error
	EventQPRequestErr                          // a QP moved to ERR because of an invalid request from the peer
	EventQPAccessErr                           // a QP moved to ERR because of a remote access violation by the peer
	EventCommEstablished                       // a QP in RTR received its first message
	EventQPLastWQEReached                      // a QP on an SRQ is in ERR and no receive it took is still outstanding
	EventPeerDisconnected                      // the peer disconnected or died
	EventDeviceFatal                           // the device can no longer work
	EventSRQLimitReached                       // an armed SRQ's posted receives fell below its limit
)

var eventNames = [...]string{
	EventCQError:          "CQ error",
	EventQPFatal:          "QP fatal",
	EventQPRequestErr:     "QP invalid request error",
	EventQPAccessErr:      "QP access error",
	EventCommEstablished:  "communication established",
	EventQPLastWQEReached: "last WQE reached",
	EventPeerDisconnected: "peer disconnected",
	EventDeviceFatal:      "device fatal",
	EventSRQLimitReached:  "SRQ limit reached",
}

func (e EventType) String() string { return nameOf(eventNames[:], e, "unknown event") }

// Counter is one named transport counter of a QP (packets, bytes,
// retransmissions, NAKs by kind, ...).
type Counter struct {
	Name  string
	Value uint64
}

// CounterSource is implemented by QPs (and by soft link endpoints) that keep
// transport counters.
type CounterSource interface {
	Counters() []Counter
}

// ReregFlags select what MR.Reregister changes (ibv_rereg_mr flags).
type ReregFlags uint8

// Re-registration flags.
const (
	ReregTranslation ReregFlags = 1 << iota // new memory (buffer)
	ReregPD                                 // new protection domain
	ReregAccess                             // new access rights
)

// Reregisterer is implemented by regions that can be re-registered in place
// (ibv_rereg_mr). The old keys stop working before it returns; the region
// gets new ones.
type Reregisterer interface {
	Reregister(flags ReregFlags, pd ProviderPD, buf []byte, access Access, mem ProviderMemory) error
}
