package soft

import (
	"context"

	"github.com/goverbs/goverbs/provider"
)

// Link is a transport for a soft device: it carries the device's work to
// peer QPs and brings theirs in.
//
// The contract, in short:
//   - Requester: after Endpoint.SendReady the link takes send WQEs with
//     QP.NextSend, in order, and finishes each with exactly one
//     QP.CompleteSend. NextSend has already applied fence, ORD and local
//     operations; it returns nil when nothing may start now, and the device
//     calls SendReady again when that changes.
//   - Responder: for each incoming request the link asks QP.Access or
//     QP.AtomicAccess for the target memory (all checks are made there),
//     copies, and releases the Target. For an incoming SEND or WRITE with
//     immediate it takes a receive with QP.NextRecv and finishes it with
//     QP.CompleteRecv.
//   - Errors: a WQE that fails completes with its status and moves the QP
//     to ERR; a responder error is reported with QP.Fail. After
//     Endpoint.Errored the link completes every WQE it has taken (with
//     WR_FLUSH_ERR unless it knows better) and takes no more.
//   - After Endpoint.Detach returns, the link no longer touches the QP, its
//     WQEs or any memory they name.
type Link interface {
	// AdjustCaps sets the link's name, transport and limits in the
	// device's capabilities.
	AdjustCaps(c *provider.Caps)
	// Connect attaches qp to a peer named by attr (AV and DestQPN) for a
	// Modify from INIT to RTR. Links that connect only through their
	// connection manager return an error wrapping ErrNotSupported.
	Connect(qp *QP, attr *provider.QPAttr) (Endpoint, error)
	// Listen and Dial are the connection manager (see provider.Device).
	// On success they have attached an Endpoint with QP.Establish.
	Listen(d *Device, addr string) (provider.Listener, error)
	Dial(ctx context.Context, d *Device, addr string, qp *QP, param provider.ConnParam) (provider.ConnInfo, error)
	// Close ends every connection of the link.
	Close() error
}

// Endpoint is a link's side of one connected QP. The device calls its
// methods without holding any lock of its own, from any goroutine; they
// must not block for long. Errored and SendReady may also be called on the
// link's own goroutine from within NextSend, CompleteSend, NextRecv and
// CompleteRecv, so they must not take a lock the link holds around those
// calls. Detach comes after every other call under way has returned, and
// no call starts after it; a method must not close or reset its own QP.
type Endpoint interface {
	// SendReady says the QP has send WQEs the link may start.
	SendReady()
	// RecvReady says receive WQEs were posted.
	RecvReady()
	// Errored says the QP entered ERR. The link completes every WQE it
	// took, takes no more, and tells its peer where its wire can.
	Errored()
	// Disconnect tells the peer the connection ends (the QP is about to
	// enter ERR).
	Disconnect()
	// Detach says the QP is being reset or destroyed. On return the link
	// no longer touches the QP or its WQEs.
	Detach()
}

// EstablishAttr are the attributes a connection manager negotiated for a QP.
type EstablishAttr struct {
	DestQPN    uint32
	AV         provider.AddressVector
	RQPSN      uint32
	SQPSN      uint32
	PathMTU    provider.MTU
	IRD, ORD   uint8
	RetryCnt   uint8
	RNRRetry   uint8
	Timeout    uint8
	MinRNRTime uint8
	// Access are the remote rights the QP grants. If zero, a QP being
	// moved from RESET gets DefaultAccess (librdmacm's remote read, write
	// and atomic, and the flush rights); a QP already in INIT keeps its
	// own.
	Access provider.Access
}

// PollYielder is implemented by links whose completions are made by
// goroutines of their own that need a CPU of this host to run (a receive
// goroutine reading a socket). When YieldIdlePolls reports true, a CQ
// whose Poll has found nothing for idleYieldAfter yields the polling
// thread to the OS on every idleYieldEvery-th empty Poll (sched_yield on
// Linux): an application that spins on Poll, on a machine with fewer
// CPUs than spinning threads, then leaves the CPU to the engine, or to the
// peer process, that makes what it waits for, instead of holding it until
// the OS time-slices the spinners (milliseconds). The thread stays
// runnable: Poll still never blocks.
type PollYielder interface {
	YieldIdlePolls() bool
}

// PollDriver is implemented by links that can make progress on the
// goroutine of an application polling a CQ, instead of waking one of
// their own (roce: a busy poller reads the device's socket itself). The
// device calls DriveEmptyPoll after a Poll found nothing, and Polls once
// more when it reports that it ran the engine; it calls BeforeWait before a
// goroutine blocks in Wait, which will poll no more. Both may be called
// from any goroutine, concurrently, and must not block.
type PollDriver interface {
	DriveEmptyPoll() bool
	BeforeWait()
}

// PolledEngine is an endpoint's engine that may run on the goroutine of
// an application polling a CQ its QP completes into, instead of on a
// goroutine of its own (shm: a busy poller runs its connection's engine
// pass itself, so one spinning thread serves the message where it is
// awaited). The endpoint registers it with QP.DriveFromPolls while it is
// connected. An empty Poll of the CQ calls DrivePoll on each engine
// registered there and polls once more when one reports progress; a Wait
// calls StopPolling on each first, since that goroutine polls no more and
// the engine's own goroutine must run again. Both may be called from any
// goroutine, concurrently, and must not block.
type PolledEngine interface {
	DrivePoll() bool
	StopPolling()
}

// WaitDriverLink is implemented by links whose endpoints may run their
// receive path on a goroutine that waits on a CQ (WaitDriver), so that the
// waiter, parked in the link's socket, is the only goroutine woken for a
// message, as a blocking socket read's is (iwarp). DrivesWaits is asked
// once per CQ, at creation.
type WaitDriverLink interface {
	DrivesWaits() bool
}

// WaitDriver is implemented by the endpoints of a WaitDriverLink. A Wait
// on a CQ into which the endpoint's QP alone completes calls DriveWait
// before each look at the CQ. DriveWait returns at once if it cannot run
// the receive path on this goroutine now (another goroutine has it; then
// the Wait sleeps until a completion or a Nudge, as usual). Otherwise it
// registers with cq.BeginDrive, handles what the socket brings, blocking
// in it, and returns once cq.Ready, ctx ended, or it had to give the
// receive path back; it must return promptly when its Interrupter is
// called. It never holds a QP's lock while it blocks.
type WaitDriver interface {
	DriveWait(ctx context.Context, cq *CQ, solicitedOnly bool)
}

// Interrupter is what a WaitDriver registers with CQ.BeginDrive: Interrupt
// is called, with a QP's lock possibly held, when a completion is pushed
// into the CQ; it must not block.
type Interrupter interface {
	Interrupt()
}

// MemoryLink is implemented by links whose peers reach registered memory
// directly, without this device's engine (shared memory). The device calls
// RegisteredMR once a region is registered, before RegisterMR returns (an
// error undoes the registration), and DeregisteringMR after the region's keys
// are revoked and local accesses drained, before Deregister returns: when it
// returns, no peer may reach the region any more.
type MemoryLink interface {
	RegisteredMR(mr *MR) error
	DeregisteringMR(mr *MR)
}
