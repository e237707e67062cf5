// Package roce is goverbs' RoCEv2 transport: the InfiniBand
// reliable-connected transport (BTH and extension headers, with the ICRC)
// in UDP port 4791, run in user space, speaking the bytes Linux rxe
// (Soft-RoCE) speaks, without root or a kernel module. It is a link of the
// software device (package soft): soft owns keys, access checks, queues and
// completions; this package segments, numbers, acknowledges, retransmits
// and places.
//
//	p := roce.New(roce.Options{Addr: "10.0.0.1"})      // UDP 10.0.0.1:4791
//	dev, err := verbs.Open(p)
//	ln, err := dev.Listen("10.0.0.1:7471")              // the side channel (TCP)
//	info, err := dev.Dial(ctx, "10.0.0.2:7471", qp, verbs.ConnParam{PrivateData: desc})
//
// # Connecting
//
// Dial, Listen and Accept run a connection manager over a side TCP
// connection, in the manner of perftest's and ibv_rc_pingpong's out-of-band
// exchange with the message flow of the IB CM (REQ, REP or REJ, RTU): each
// side sends its QP number, initial PSN, path MTU, RoCE address (IP and
// UDP port), IRD, ORD, retry counts, a random 16-byte cookie and up to
// MaxPrivateData bytes of private data. Buffers a program wants to share
// travel there, for example as verbs.RemoteBuf encodings. The MTU is the
// smaller of the two, and a side's ORD never exceeds the other's IRD. The
// TCP connection stays open: Disconnect sends a DREQ, and a peer process
// that dies closes it, so the QP moves to ERR with EventPeerDisconnected
// at once rather than after the retry counters run out (as rdma_cm does
// when the kernel tears a dead process's connections down).
//
// The data path goes only to an address the exchange proved (cm_probe.go),
// so that no one can aim a QP's answers at a third party. The RoCE IP a
// REQ or REP names must be the side channel's remote IP, which the TCP
// handshake proved (Dial connects from the device's IP for that reason);
// the UDP port is proven by the cookie: each side sends the other's cookie
// back in a probe datagram from its device's socket, the dialer first, and
// a QP is attached only once the peer's probe came from exactly the
// address it named. The dialer resends its probe with a growing interval
// (20 ms to 1 s) until the listener's answers. REQ and REP open with the
// magic "GVR2" (side-channel wire version 2); a peer of version 1 is
// refused. A REJ carries the application's private data or a reason
// ("RoCE address ... is not at the side channel's source IP", "no probe
// came from the dialer's RoCE address ...", too many requests waiting),
// which Dial returns as a verbs.RejectError.
//
// A listener reads each REQ on its own goroutine within 5 s. It holds at
// most 512 connections that have not sent their REQ, 128 from one IP; one
// more evicts the oldest silent one (of that source, or of all), so a flood
// only churns its own connections. At most 256 requests wait for Accept;
// beyond that they are rejected, as a full backlog refuses. A request
// whose dialer hangs up is withdrawn before Accept sees it. A temporary
// accept error (EMFILE, ENFILE, ENOBUFS, ...) is retried with backoff up
// to 1 s; any other closes the listener, and Accept returns it.
//
// # Connecting through the IB CM
//
// With Options{CM: CMIB}, Dial, Listen and Accept speak the InfiniBand CM
// instead, as the kernel's rdma_cm does over RoCE: REQ, MRA, REJ, REP,
// RTU, DREQ and DREP as 256-byte MADs in UD SENDs between the two devices'
// QP1 (the GSI, Q_Key 0x80010000), with rdma_cm's service IDs (its TCP
// port space) and its 36-byte header with both IPs in front of the REQ's
// private data. It is how goverbs reaches rping, ucmatose, rdma_server,
// perftest -R and every other librdmacm program over rxe or a RoCE NIC
// (docs/interop.md has the rows run against the kernel); the state
// machines, timeouts, retries and duplicate handling are internal/ibcm's,
// the MAD codec internal/wire/ib's. Addresses are "ip:port" (the rdma_cm
// port; the peer's GSI at UDP 4791) or "ip:port@udp" for a goverbs device
// at another UDP port.
//
// The side channel stays the default between goverbs devices, for what
// the IB CM cannot give: it proves the peer's UDP address with a cookie
// before the data path sends there (the IB CM, like rdma_cm, takes the
// path its MADs name), carries MaxPrivateData bytes with their length
// (the IB CM's fields are fixed: 56 bytes in a REQ behind rdma_cm's
// header, 196 in a REP, 148 in a REJ, zero-filled), and sees a peer process die at once (its TCP connection
// ends), where the IB CM learns it from a DREQ that a dead process never
// sends or from the data path's retries.
//
// A connection's ConnInfo.LocalAddr and RemoteAddr are the connection
// manager's, as rdma_get_local_addr and rdma_get_peer_addr report them:
// the dialer's RemoteAddr is the address it dialed and its LocalAddr names
// this connection alone (the side channel's TCP addresses; with the IB CM,
// the device's IP and the rdma_cm source port of its REQ). They are not
// the UDP address of the data path, which every QP of a device shares.
//
// A QP can also be connected by hand, as ibv_rc_pingpong does: Modify from
// INIT to RTR with an AddressVector and the peer's QPN, RQPSN, path MTU and
// max_dest_rd_atomic, then to RTS. The AddressVector names the peer by Addr
// ("ip:port", or "ip" for port 4791), or by the IP in GID (IPv4-mapped for
// IPv4, as RoCEv2 GIDs are) at port 4791; with neither, the peer is a QP of
// the same device.
//
// # The wire
//
// Every request and response is one UDP datagram: BTH, extension headers,
// payload, pad, ICRC (package internal/wire/ib; IBA Vol 1 chapter 9, Annex
// A17; IBTA 1.5 for FLUSH and ATOMIC WRITE). Payloads are gathered straight
// from registered memory into the socket (sendmmsg with one iovec per
// piece); received payloads are copied from the socket buffers into the
// target region after soft has checked the key, bounds and rights. The UDP
// source port is the device's bound port for every QP (rxe hashes the QP
// number into it for ECMP); the destination is the peer's bound port.
//
// The ICRC covers the IPv4 Identification and flags, which no UDP socket
// reports on receive (WIRE.md 2.7). A device sends from an unconnected
// socket with IP_PMTUDISC_DO, for which Linux sends Identification 0 and
// DF, so its ICRC is the one the wire carries; on receive it verifies the
// ICRC assuming the same of the peer. That is exact between goverbs devices
// and for IPv6, and wrong for rxe or hardware over IPv4: set ICRC to
// ICRCIgnoreIPv4 to talk to them. Packets whose ICRC fails are dropped and
// counted.
//
// UDP segmentation offload (GSO, and GRO on receive) cuts the system calls
// of a bulk transfer by an order of magnitude. The kernel numbers the IPv4
// Identification of GSO segments 0, 1, 2..., which a goverbs receiver
// cannot see but rxe, a NIC or scapy on a capture would, so GSO is used
// only toward peers connected through the connection manager (goverbs
// devices), and never when Options.DisableGSO or GOVERBS_UDP_GSO=0 says so
// (captures need one datagram per packet).
//
// # Reliability (IBA 9.7; rxe_req.c, rxe_resp.c, rxe_comp.c)
//
// The requester segments SEND and WRITE messages to the path MTU (256 to
// 4096), numbers packets with 24-bit PSNs (a READ uses one per response),
// keeps at most Window PSNs unacknowledged, and matches responses to WQEs:
// ACKs complete SENDs and WRITEs, READ responses are placed in order, an
// ATOMIC ACKNOWLEDGE carries the original value, a zero-length READ
// response answers FLUSH and ATOMIC WRITE. A response for a later PSN
// acknowledges everything before it; if a READ or atomic before it has not
// had its answer, that answer was lost and the requester asks again (an
// implied NAK), a READ for the rest of its range only. A PSN sequence error
// NAK, an implied NAK and the local ACK timeout (4.096 µs × 2^timeout) start
// a go-back-N; retry_cnt such retries without progress end in
// RETRY_EXC_ERR. A timer that comes due while datagrams wait unread in
// the socket runs after the next batch is read and placed (a starved
// process must not time out ACKs it has received but not yet read). An
// RNR NAK makes the requester wait the responder's
// min_rnr_timer (the IBA table) and resend, up to rnr_retry times (7:
// forever), then RNR_RETRY_EXC_ERR.
//
// The responder executes requests in PSN order. A PSN ahead of the expected
// one gets one sequence error NAK per gap; a PSN behind it is a duplicate:
// a SEND or WRITE is acknowledged again, a READ, atomic, FLUSH or ATOMIC
// WRITE is answered from its responder resource (IRD entries, recycled as
// rxe does), a READ from any PSN in its range. A READ, atomic, FLUSH or
// ATOMIC WRITE that finds all IRD resources in use (a resource is in use
// until its answer is sent, which a requester within its ORD never
// outruns) is an invalid request, as the IBA's NAK codes say, so a peer
// cannot make the responder send more than IRD answers ahead of what it
// received. Opcode sequence and length
// violations are NAKed as invalid requests, access violations as remote
// access errors, a faulty receive WQE as a remote operational error; all
// three move the QP to ERR (class C). A SEND that finds no receive gets an
// RNR NAK. ACKs are cumulative: one goes out for a batch of packets that
// asked for one.
//
// Where this differs from rxe, and why:
//   - retry_cnt 7 is seven retries, not infinite (rxe's quirk): IBA gives
//     that meaning to rnr_retry only, and a dead peer must end in an error.
//   - AckReq is set on the last packet of signalled WQEs, of READs,
//     atomics, FLUSH and ATOMIC WRITE, every AckEvery packets, when a
//     quarter of the send queue waits, and on retransmissions; an idle
//     requester asks for the rest with a probe after a millisecond (see
//     ackreq.go). rxe asks on the last packet of every message. Against
//     an rxe responder this is still correct: rxe acknowledges AckReq
//     packets and duplicates.
//   - The responder acknowledges a batch of AckReq packets with one ACK.
//   - RC and UD (no UC or XRC), the default partition only.
//
// # UD queue pairs
//
// A QP created with verbs.QPTypeUD (INIT with a Q_Key, RTR, RTS with a
// send PSN) sends each WR as one SEND_ONLY datagram (BTH, DETH, ImmDt) of
// at most the device's path MTU to the address handle's UDP address, and
// completes it once the datagram is in the socket; a longer one completes
// with LOC_LEN_ERR. A received datagram must carry the QP's Q_Key; its
// receive gets rxe's 40-byte GRH and then the payload, and names the
// sender's QP. Datagrams for QP1 (the GSI) go to the IB connection
// manager's agent when one runs (internal/ibcm), and are dropped and
// counted otherwise. See ud.go.
//
// # Deregister and peer READs
//
// MR.Deregister keeps the verbs contract: it waits for the peer accesses
// under way, and after it returns no byte of the region is read or
// written. A READ holds its range from the moment the responder accepts
// it until its last response is in the socket, and for a linger of two
// local ACK timeouts after that (about 134 ms at the default timeout 14;
// 100 ms when the timeout is infinite), so that a response lost on the
// wire and asked for again is still answered; every replay starts the
// linger again. Deregister therefore waits at most for the READs the
// responder has accepted (at most IRD per QP, each up to 2 GiB) to be
// sent, plus the linger, plus the retransmissions the requester makes
// within it. A READ that arrives after Deregister started, or a replay
// after the linger, is refused with a remote access error. WRITE packets
// are placed each through its own access check: the rest of a WRITE is
// the peer's to send, and Deregister never waits for a peer's packets, so
// a WRITE whose later packets arrive after Deregister started fails with
// REM_ACCESS_ERR.
//
// The cost: the regions a peer READs stay pinned up to that long after the
// last response, and a peer that keeps repeating a READ within the linger
// keeps its Deregister waiting (each replay starts the linger again);
// destroying or resetting the QP lets every hold go at once.
//
// # Engine
//
// Each device has one engine: the state of all its QPs, the transmit batch
// and one timer, guarded by a lock called the turn. The goroutine that
// brings work runs the engine to completion while it holds the turn: the
// reader goroutine (recvmmsg, then placement and answers), the goroutine
// that posts a send (its packets leave from PostSend), or the engine
// goroutine (timers, and work a busy turn left). See engine.go for why this
// rather than one goroutine with a select loop. Every state machine takes
// the time as an argument; the tests drive it.
//
// A goroutine that busy-polls a CQ of the device reads the socket itself:
// after 64 empty Polls with no Wait between them the reader goroutine
// parks, and each empty Poll receives what is queued without waiting and
// runs the turn on the polling goroutine, so a spinning process needs no
// other thread woken to see a packet (two processes spinning on two CPUs
// otherwise waited for the kernel's time slice, about 2 ms, per message).
// A Wait on a CQ shared by several QPs, or a millisecond without an empty
// Poll, gives the socket back to the reader (drive.go; the counter
// rx_polled_datagrams shows who read). Run a busy-polling process with
// GOMAXPROCS equal to the goroutines that spin, plus one for each device
// that no poller drives and that must serve its peers promptly (a READ
// target): an idle P parks its thread in the netpoller, and every
// datagram wakes that thread even though the pollers read the socket (BENCHMARKS.md §23: p99 of a two-process 8 B
// ping-pong 36-68 µs, 13-27 µs with GOMAXPROCS lowered; goverbs bench
// lowers it while it busy-polls).
//
// A poller that has just read a WRITE (with no receive to complete) leaves
// the turn's ACKs queued for its application's next post, so that the ACK
// and perftest's ib_write_lat answer leave in one system call: the ACK
// coalescing IBA allows and rxe does (ackhold.go; poll_acks_held). The
// ACKs leave with the next turn, empty Poll or Wait, and within a
// millisecond or two when the application stops polling altogether, far
// inside any peer's ACK timeout (67 ms at the default).
//
// A goroutine that waits on the CQ of one QP (CQ.Wait, PollWait) reads the
// socket too, but blocking: it takes the socket from the reader as a
// poller does, parks in it, and runs the turn for what arrives until its
// CQ holds a completion, so that the netpoller's wake-up is the only one
// per message instead of the reader's and then the waiter's (drive_wait.go;
// rx_waited_datagrams). A completion another goroutine makes, the Wait's
// context and Close end its read; the reader comes back when a connection
// is set up, and a millisecond or two after the last waiter
// (reader_park_timeouts). Before it parks, it reads without waiting for
// Options.WaitSpin (30 µs by default) after its last datagram, so that a
// reply within that time costs no wake-up at all; the reader goroutine
// does the same after each batch it reads, which serves a READ target's
// next request, with no application polling or waiting there, without a
// wake-up either. Options.NoWaitDrive keeps
// the reader the only reader.
//
// The QPs' timers (ACK timeout, RNR wait, the probe for an owed ACK, a
// READ's linger, a drain) are kept in a heap by deadline, and a turn
// re-keys only the QPs it touched, so no turn costs time in proportion to
// the number of idle QPs (timers.go).
//
// # Completions and counters
//
// A WRITE completes when the responder's ACK arrives (Caps.WriteCompletion
// is CompletionAcked): the responder placed the bytes before it sent the
// ACK, and placement is visible to any later message from this QP; FLUSH
// proves global visibility or persistence. A receive completion becomes
// pollable only after the ACK of its message (when the sender asked for
// one) is in the socket (resp_done.go): a server that polls a client's
// last message and exits at once, without closing anything, still leaves
// the client's SEND successful. Disconnect and Close send every ACK owed
// before the DREQ, and the side channel's DREQ carries the responder's
// expected PSN (a 4-byte body; an empty one, from a goverbs of before,
// means unknown): the peer takes it as the ACK of its SENDs and WRITEs
// before that PSN, so a delivered message completes successfully even
// when its last ACK datagram was lost; a READ or atomic whose response
// was lost is still flushed. The IB CM's DREQ MAD has no room for it.
// Per-QP counters (packets,
// bytes, retransmissions, timeouts, NAKs by kind sent and received, RNR
// waits, duplicates, foreign and corrupt packets dropped) come from
// verbs.QP.Counters; Provider.Counters adds the device's (packets for no
// QP, datagrams, GSO use, socket errors). goverbs info --counters shows
// both after a short exchange, and goverbs bench reports those that moved
// during each test.
//
// # Talking to rxe
//
// Bind port 4791 (rxe sends there), accept any source port from the peer
// (rxe picks it per QP) and skip the IPv4 ICRC check:
//
//	roce.New(roce.Options{Addr: "10.77.2.2", AnyPeerPort: true, ICRC: roce.ICRCIgnoreIPv4, PathMTU: 1024})
//
// and connect QPs by hand with the QPN, PSN and GID the rxe side prints.
package roce
