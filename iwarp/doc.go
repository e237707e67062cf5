// Package iwarp is goverbs' iWARP transport: RDMA over plain TCP in the
// standard wire format — MPA (RFC 5044, with the RFC 6581 enhanced start-up
// and IRD/ORD negotiation), DDP (RFC 5041) and RDMAP (RFC 5040), plus the
// RFC 7306 atomics and immediate data — so that captures decode in
// Wireshark and a Linux soft-iWARP (siw) peer can talk to it. It is a link
// of the software device (package soft): soft owns keys, access checks,
// queues and completions; this package moves the bytes.
//
//	dev, err := verbs.Open(iwarp.New())            // options: iwarp.CRC(true), iwarp.BusyPoll(true), ...
//	ln, err := dev.Listen("127.0.0.1:0")           // ln.Addr() is the real address
//	info, err := dev.Dial(ctx, "host:port", qp, verbs.ConnParam{PrivateData: hello})
//
// # Data path
//
// Each connection has a receive goroutine that parses the TCP stream and a
// send engine. A sender gathers straight from registered memory into the
// socket (writev: headers from a scratch slot, payload from the region, no
// intermediate copy); the receiver reads payload straight from the socket
// into the target region or receive buffers (readv) after soft has checked
// the key, bounds and rights, and READs, atomics and FLUSHes are answered
// by the responder's engine without its application. Small FPDUs, and the
// bytes a read finds beyond the current FPDU, go through a receive buffer
// of 4 to 256 KiB: the read-ahead starts at 4 KiB and doubles while the
// socket is backed up (fewer system calls, each of which may also send a
// TCP ACK, for one copy more), and falls back as soon as the receiver
// keeps up; the buffer grows with it and shrinks again over the next
// waits. While the receive goroutine waits with nothing buffered, the
// buffer goes back to a shared pool, so an idle connection holds none and
// a new one reuses the buffer of one that ended. FPDUs
// are sized to the path MSS (about 64 KiB on loopback, see FPDUSize). In
// steady state no message allocates.
//
// The send engine runs on the posting goroutine when it is free, with
// non-blocking writes: a WRITE goes from PostSend to the wire with no
// goroutine switch. When the socket is full the work passes to the
// connection's send goroutine, the only one that waits for the socket, so
// PostSend never blocks on a slow peer.
//
// # Waiting: netpoller or busy polling
//
// By default every wait parks in the Go netpoller: an idle connection costs
// no CPU, and a message wakes its receive goroutine as a Go TCP read would.
// A goroutine that waits on a CQ into which one connection's QP alone
// completes (CQ.Wait, PollWait) runs that connection's receive path
// itself, parked in its socket: the message is read, placed and completed
// on the goroutine that waits for it, with one wake-up instead of two (the
// receive goroutine's and then the waiter's). The receive goroutine lends
// its socket to such waiters and takes it back within a millisecond of
// the last one, for an FPDU too large to be read whole (it streams into
// its target), and for a SEND that finds no receive posted (the RNR wait
// is its own); WaitDrive(false) keeps the receive goroutine the only
// reader. Before it parks, such a waiter reads without waiting for
// WaitSpin (30 µs by default) after its last FPDU, so that a reply within
// that time costs no wake-up at all. A CQ shared by several QPs is waited
// on as before.
// BusyPoll(true) makes the receive goroutine spin on non-blocking reads
// (yielding with runtime.Gosched between attempts, and, once 20 µs passed
// without data, its thread to the OS now and then): the lowest latency, at
// the price of a CPU per connection while its traffic flows (see
// docs/bench/iwarp.md for the figures). A read that has found nothing for
// twice the wait that last ended with data (at least 50 µs, at most 200 µs)
// parks in the netpoller, so an idle connection costs no CPU and many
// connections do not spend the CPUs on spinning; the first message after
// such a pause costs a netpoller wake-up. An application that keeps
// polling a CQ of the connection (64 empty Polls with no Wait between
// them) takes the receive path over as a waiter does: each empty Poll
// reads what the socket holds without waiting and handles it on the
// polling goroutine, and the receive goroutine parks until a Wait, an
// FPDU too large to read whole, a SEND that finds no receive posted, or a
// millisecond or two with no poll pass gives it back; so a busy-polling connection
// end spins one goroutine, not two (BENCHMARKS.md §23). A Poll that keeps
// finding the CQ empty yields its thread now and then (soft.PollYielder),
// so that spinners on a machine with fewer CPUs than spinning threads
// leave the peer, in this process or another, a CPU to send what they
// wait for. Applications that choose it should poll their CQs or memory
// without parking too, call runtime.Gosched now and then (the receive
// goroutine needs a turn when it takes the socket back), and run with
// GOMAXPROCS equal to the number of goroutines that spin, plus one for
// each that must run promptly without spinning (a device that no poller
// drives, serving a peer's READs, is one; with no P to spare it runs only
// when the Go runtime polls the network, every 10 ms): an idle P parks
// its thread in the netpoller, and every segment that reaches the socket
// wakes that thread even though the pollers read it, which cost a tenth of
// the messages of a two-process ping-pong 20-100 µs (goverbs bench lowers
// GOMAXPROCS so while it busy-polls).
//
// # Completions and ordering
//
// A WRITE or SEND completes when the peer has placed it: the engine holds
// the WR until a later response from the peer (a READ's, an atomic's, or a
// zero-length READ it sends for the purpose, a "probe") proves that the
// peer handled everything before it, since an iWARP peer handles its
// inbound stream in order. So Caps.WriteCompletion is CompletionPlaced, and
// a WRITE that the peer refuses (a bad rkey, a range outside the region)
// completes with the error itself. Probes are sent after a signalled WR,
// when a quarter of the send queue waits unsignalled, and 1 ms after the
// send queue went idle; a probe takes an ORD slot. LocalCompletion(true)
// gives the adapter convention instead: WRITE and SEND complete when their
// last byte is handed to TCP (CompletionLocal); a remote error then moves
// the QP to ERR with an EventQPFatal carrying the peer's Terminate, but the
// WR that caused it may already have completed successfully. A connection
// whose peer offers IRD 0 cannot probe and completes locally.
//
// Between goverbs peers (capability bit 0x40) a message that consumes a
// receive — SEND, SEND_WITH_IMM, SEND_WITH_INV, WRITE_WITH_IMM — needs no
// probe: the receiver confirms it with a Placed notice, and its receive
// completion becomes pollable only once that notice is handed to the
// socket, as a RoCE responder's ACK precedes its receive completion. So a
// responder whose process ends right after it polled a receive (os.Exit,
// log.Fatal, a crash) has already confirmed the SEND it holds, and the
// sender completes it with SUCCESS. The receives filled in one pass over
// the stream, up to the point where the receive goroutine would wait (at
// most 32), share one notice and one write; its count also confirms every
// earlier WRITE. A SEND ping-pong thus moves two FPDUs per direction (the
// SEND and the peer's notice) instead of three (SEND, probe, probe
// response), and the receive completion waits for one small write.
//
// A READ completes when the last response byte is placed; an atomic, FLUSH
// or ATOMIC WRITE when its response arrives. A receive completion of a
// SEND or of a WRITE_WITH_IMM's immediate data implies every earlier WRITE
// of the QP is placed (TCP and the in-order receive give it). With CRC on,
// a large FPDU's payload reaches its target before the CRC at its end is
// checked: a corrupt FPDU can spoil only bytes the peer was allowed to
// write, and ends the connection.
//
// # RNR: a SEND that finds no receive
//
// iWARP has no RNR NAK. An untagged message (SEND, SEND_WITH_IMM, or the
// immediate data of WRITE_WITH_IMM) that finds no posted receive waits at
// the receiver for one, up to the RNR budget (RNRBudget, default 1 s); the
// connection's later messages wait behind it, as TCP orders them. A
// receive posted meanwhile takes it. When the budget runs out the receiver
// sends a Terminate (DDP untagged buffer error "no buffer available"), its
// QP moves to ERR (EventQPRequestErr, outstanding WRs flushed), and the
// sender's WR completes with StatusRNRRetryExcErr and its QP moves to ERR.
// A sender that disconnects meanwhile (its Final notice and FIN come
// behind the waiting message) ends the wait within milliseconds: the
// waiting receiver keeps reading what arrives into its receive buffer,
// and at the end of the stream its QP moves to ERR with
// EventPeerDisconnected, as for any disconnect; the waiting message takes
// no receive, and the sender's WR flushes (StatusWRFlushErr). This holds
// when the rest of the stream fits the receive buffer (up to 256 KiB) and
// the socket's: behind a larger message TCP's flow control may keep the
// sender's FIN at the sender, and the wait then ends by its RNR budget.
// QPAttr.RNRRetry and MinRNRTimer are kept but not used. Caps.RNRRule says
// the same.
//
// # Errors and Terminate
//
// A protocol violation by the peer — a forged STag, a range outside the
// region (wraparound included), missing rights, a wrong opcode or queue
// number, an MSN or MO out of sequence, a ULPDU length that lies, a bad
// CRC, more READs than the IRD allows, a SEND longer than the receive —
// is answered with a Terminate carrying the layer, error type and code of
// RFC 5040 §4.8 (a refused remote access: RDMAP, remote protection, with
// the code of soft's Fault) and a copy of the offending headers, after
// which both QPs move to ERR and the connection closes. Memory outside the
// ranges the checks granted is never touched, and other connections are
// unaffected. One difference from RoCE and shm: a multi-segment WRITE
// whose range runs out of its region part way fails after placing the
// segments before the one that crosses, inside the grant, because DDP
// carries no message length for the sink to check up front (RFC 5041 §5;
// the kernel's siw places them too). A WRITE that fails with
// StatusRemAccessErr may therefore have changed granted bytes; nothing of
// the refused segment or after it lands.
//
// The WR the Terminate blames completes with the status termStatus gives
// it (a refused access: StatusRemAccessErr; a SEND too long for the
// receive: StatusRemInvReqErr at the sender and StatusLocLenErr at the
// receiver) and VendorErr 0x01LLTTCC (layer, type,
// code); earlier WRs completed, later ones flush. Asynchronous events carry
// a *TerminateError.
//
// A disconnect (QP.Disconnect, Close, Device.Close, an application moving
// the QP to ERR) ends the stream after the FPDU in progress with a FIN; the
// peer's QP moves to ERR with EventPeerDisconnected. A peer that closes,
// resets or dies does the same to ours. A peer that vanishes silently (a
// link cut, a host gone) is found by TCP: iWARP leaves retransmission to
// it, and a connected QP sets its socket's TCP_USER_TIMEOUT to the QP's
// ACK timeout × (retry count + 1) (4.096 µs × 2^Timeout per try, as roce
// waits before RETRY_EXC_ERR; 537 ms for the connection manager's Timeout
// 14 and ConnParam.RetryCount's default 7), but at least the RNR budget
// and 400 ms more: 1.4 s with the default budget of 1 s. The RNR budget
// counts because a receiver waiting for a receive stops reading the
// stream beyond its receive buffer, and Linux ends a connection whose
// window stays shut for the user timeout although the peer answers its
// probes: the sender must outlast the peer's RNR wait (taken to be as
// long as ours) to learn its outcome, RNR_RETRY_EXC_ERR, and not a lost
// peer. The 400 ms are twice
// TCP's minimum retransmission timeout, so that one lost segment cannot
// end a connection before its retransmission could be answered. An
// application that wants the QP's figure alone sets RNRBudget to at most
// that less 400 ms (RNRBudget(100*time.Millisecond): 537 ms). Timeout 0
// (infinite) leaves the kernel's own limit. Until the QP is connected
// (the MPA exchange) the socket has 30 s, besides the exchange's own
// deadline. TCP's limit counts only while it holds data it could send:
// when it had acknowledged everything of ours and the link died before
// the peer's answer, a watchdog (a tick every ACK timeout while the QP
// waits for the peer) fails the stream after the same limit of silence,
// when the kernel too has heard nothing from the peer's host (TCP_INFO).
// An idle connection's loss is found by keepalives (15 s idle, then every
// 5 s). The same limit ends a connection whose peer process
// stops reading for that long (stopped, starved), as roce's requester
// gives up on a responder that stops answering. Every outstanding WR
// completes: the first one the peer never confirmed with
// StatusRetryExcErr when the peer was lost, the rest with
// StatusWRFlushErr.
//
// What the responder placed completes with SUCCESS at the requester
// however the responder's QP ends (SEMANTICS 16a), between goverbs peers:
// before its FIN the ending side finishes the batch in flight, waits until
// its receive goroutine stopped, sends every answer it still owed (READ
// responses, executed atomics) and then a Final notice saying how many
// bytes of the peer's stream it wholly handled; the peer completes every
// WRITE and SEND that ends within them, although their probe is never
// answered, and flushes the rest (StatusWRFlushErr). Close and
// Device.Close wait for the notice to be written (at most 250 ms against
// a peer that does not read), then close the socket without lingering,
// discarding unread bytes first so that the close is a FIN, not a reset.
// No notice follows a Terminate, either way, or a lost connection.
//
// A process that exits without closing its QPs or device sends no Final
// notice: Go runs no finalizers and no engine code at exit, and the kernel
// closes the socket, with a reset if bytes were unread (a probe) and a FIN
// if not. Neither proves anything was placed: a FIN shows only that every
// byte was read out of the socket, and the receive goroutine reads ahead
// into its buffer before it parses and places, so a process may exit
// between reading a message and placing it and still send a FIN (TCP's
// acknowledgements say even less: that the kernel got the bytes). What
// the application saw complete into a receive queue was confirmed before
// it could see it (the Placed notice above), so a SEND whose receive the
// peer polled completes with SUCCESS however the peer's process ends. A
// WRITE that nothing after it confirmed (no later SEND, no answered probe
// or request) when the peer's process exited completes with
// StatusRetryExcErr (or StatusWRFlushErr after the first) although the
// peer may have placed it; a responder that must not leave its peer unsure
// of such WRITEs closes its QP or device (or calls QP.Disconnect) before
// it exits, or the requester ends its WRITEs with a SEND or WRITE_WITH_IMM
// that the responder's application waits for.
//
// # Connection management
//
// Listen("host:port") (":0" picks a port; Listener.Addr reports it) and
// Dial(ctx, addr, qp, param) exchange one MPA Request and Reply: rev 2 with
// the E flag and the RFC 6581 IRD/ORD block (rev 1 accepted from peers), a
// zero-length RDMA Write as RTR (P2P), no markers (a peer that asks for them
// is refused), CRC32c when either side asks (CRC). IRD and ORD are
// negotiated RFC 6581's relaxed way: each side's ORD is cut to the other's
// IRD; a zero ConnParam asks for DefaultDepth. Private data travels both
// ways: at most Caps.MaxPrivateData bytes, which is the 256 bytes Linux siw
// and cxgb4 accept, less the 4-byte IRD/ORD block, less the 16 bytes of
// goverbs blocks when they are sent: 236 by default, 252 with
// CapabilityBlock(false). Reject sends a Reply with R set and private data;
// the dialer gets a *provider.RejectError carrying it. Every start-up step
// is bounded: Dial by its context (DialTimeout when it has none; a Dial out
// of time matches provider.ErrTimeout and context.DeadlineExceeded), and on
// the listening side reading a Request by MPARequestTimeout (1 s) and
// waiting for Accept or Reject by MPATimeout; malformed or hostile frames
// (a wrong key, markers, revision 3, a PD_Length that lies, a client that
// dribbles) are refused with an error wrapping provider.ErrProtocol or
// ErrTimeout, reported to OnRefused on the listening side.
//
// A listener withstands floods of connections that never speak or stop
// half-way through their Request: each connection's Request is read by its
// own goroutine, so Accept never waits behind a slow peer; at most 1024
// connections (HalfOpenLimit) are in their MPA exchange at once, 32 from
// one source address (an IPv6 /64), and a newcomer beyond either bound
// evicts the oldest rather than being refused, so connections that hold
// slots cannot lock out a peer that sends its Request at once. At most 256
// Requests wait for Accept or Reject; beyond that a new one is rejected.
//
// # Extensions and siw interoperation
//
// RFC 7306 defines no flag to negotiate its extensions, so goverbs
// announces them in a capability block in the MPA private data (package
// iw), followed by a connection block with the QP number and initial PSN
// (so that Query reports the peer's QPN, as InfiniBand connections do).
// Extensions are used only when both peers announced them:
//
//   - Atomics (CAS, FETCH_ADD): RFC 7306 Atomic Request/Response on QN 1 and
//     QN 3, counted against ORD/IRD. The responder honours RFC 7306's masks.
//   - WRITE_WITH_IMM: an RDMA Write followed by an RFC 7306 Immediate Data
//     message carrying the 32-bit value in its first 4 bytes (network
//     order); it consumes a receive, whose byte_len is the WRITE's length.
//   - SEND_WITH_IMM: RFC 7306 has no such message (its Immediate Data would
//     consume a second receive), so goverbs uses private RDMAP opcode 0xE
//     (0xF with the solicited event): a Send whose RsvdULP carries the
//     value where Send with Invalidate carries its STag.
//   - FLUSH (0xC) and ATOMIC WRITE (0xD): private RDMAP opcodes on QN 1,
//     answered by an RFC 7306 Atomic Response; see wireext.go for the
//     layout. No RFC defines them for iWARP yet.
//   - The Final notice (capability bit 0x20): private RDMAP opcode 0xC on
//     QN 2 (the Terminate queue; FLUSH's opcode, told apart by the queue),
//     one segment whose 8-byte header is the count, big-endian, of bytes of
//     the receiver's stream (every FPDU after the MPA exchange, framing,
//     pad and CRC included) that the sender wholly handled in order; sent
//     once, as the last FPDU before a graceful FIN, after every owed
//     response. See "Errors and Terminate" and wireext.go.
//   - The Placed notice (capability bit 0x40): private RDMAP opcode 0xD on
//     QN 2 (ATOMIC WRITE's opcode, told apart by the queue), with the
//     Final notice's layout and count, sent while the stream goes on:
//     before the receiver completes any receive, one notice covering the
//     receives it filled since the last, so a SEND that consumed a receive
//     needs no probe. Every QN 2 message carries MSN 1, as RFC 5040 gives
//     the Terminate. The counters placed_notices_sent and
//     placed_notices_received count them. See "Completions and ordering"
//     and wireext.go.
//
// Against a peer that did not announce an extension (Linux siw never
// does), a WR that needs it completes with StatusLocQPOpErr, VendorErr
// VendorNotNegotiated plus the feature bit, and an EventQPFatal wrapping
// ErrExtensionNotNegotiated; these opcodes stay in Caps.Opcodes because
// they work between goverbs peers. CapabilityBlock(false) leaves the blocks
// out, for siw peers whose applications would see them as private data.
//
// Where siw departs from the RFCs, goverbs follows siw when asked
// (docs/interop.md): as a responder siw sends FPDUs right after its MPA
// Reply instead of waiting for the initiator's first (RFC 5044 §7.1.1), and
// perftest's ib_write_lat -R depends on it; WaitForInitiator(false) does
// the same. As an initiator siw drops a connection when FPDU bytes follow
// the Reply in the same read, so a goverbs responder that waits (the
// default) is the safe one with siw initiators.
//
// # Concurrency and ownership
//
// Registered memory named by a WR belongs to the engine from PostSend to
// the WR's completion; a responder holds a READ's source range against
// deregistration only while its bytes move (never while it waits for the
// socket, so a stalled peer cannot hold up Deregister). All exported API
// is safe for concurrent use. Internally, whoever runs the receive path
// (the receive goroutine, or a CQ waiter it lent the socket to: drive.go)
// owns the parser state, the send engine's state belongs to whoever holds its
// mutex, and the two share the flight window and the responder queue under
// their own locks (see endpoint.go).
package iwarp
