// Package fabric is goverbs' backend for real RDMA fabrics: the verbs API
// of package verbs over libfabric (OFI), the engine MPI, NCCL's OFI plugin
// and DAOS run on. Its providers drive InfiniBand, RoCE and iWARP NICs
// (verbs), AWS EFA (efa), HPE Slingshot (cxi), and TCP, UDP, sockets and
// shared memory in user space.
//
// The package needs cgo and the build tag libfabric (and libfabric-dev,
// 1.17 or later); without them it builds as a stub whose New returns an
// error wrapping provider.ErrNotSupported, so a plain go build and go test
// work without the C library:
//
//	go test -tags libfabric ./fabric/
//
// # Devices
//
// A Provider names a libfabric provider and, optionally, its fabric and
// domain; each verbs.Open of it opens a device (fi_fabric, an event queue
// for connection events, and two goroutines that progress them):
//
//	p, err := fabric.New("fabric:tcp")            // or "verbs?domain=mlx5_0", "sockets", ...
//	dev, err := verbs.Open(p)
//
// The device's capabilities (verbs.Caps) are read from fi_getinfo and
// fi_query_atomic: queue sizes (tx/rx size), SGEs (iov limits), inline data
// (inject size), QPs (ep_cnt), CQs (cq_cnt), regions (mr_cnt), message size,
// connection data (FI_OPT_CM_DATA_SIZE, less goverbs' 12-byte header), the
// opcodes and atomics, what a WRITE's completion proves, hardware or
// software data path (verbs, efa, cxi, psm2/3, opx... are NICs). Providers
// lists what this host has, for `goverbs info`.
//
// A QP is a connected endpoint (FI_EP_MSG). Providers that offer only
// reliable datagrams (FI_EP_RDM: efa, cxi, shm, and layered ones such as
// verbs;ofi_rxm) are not supported yet: New says so with ErrNotSupported.
//
// # How verbs maps onto libfabric
//
//   - PD: one libfabric domain (fi_domain), so a region's rkey is unknown to
//     the endpoints of other PDs and libfabric refuses it.
//   - MR: fi_mr_reg of the caller's memory (pinned with runtime.Pinner for
//     the region's life) or of package mem's. Rights map both ways:
//     local-write adds FI_RECV|FI_READ, remote-write FI_REMOTE_WRITE,
//     remote-read FI_REMOTE_READ; libfabric has no atomic right, so
//     remote-atomic is granted as FI_REMOTE_READ|FI_REMOTE_WRITE, and
//     MR.Access reports the rights the rkey really grants. The rkey is
//     chosen from crypto/rand (fi_mr_reg's requested key) unless the
//     provider picks it (FI_MR_PROV_KEY); the lkey is goverbs' own (libfabric
//     has none), checked in Go at post time with the bounds and the
//     local-write right, as a NIC would (a failure completes the WR with
//     StatusLocProtErr). Where the provider addresses regions by offset (no
//     FI_MR_VIRT_ADDR: tcp, sockets in 1.17), regions are zero-based:
//     Addr() is 0, as with IBV_ACCESS_ZERO_BASED, and SGEs and peers use
//     offsets. FI_MR_LOCAL descriptors are passed where the provider wants
//     them. Re-registration (MR.Reregister) registers anew and closes the
//     old registration, so the old keys stop working before it returns.
//   - CQ: a ring of work completions in Go, fed by libfabric CQs
//     (FI_CQ_FORMAT_DATA, one per domain whose QPs complete into it)
//     whenever the CQ is polled or waited on, and by the device's progress
//     goroutine when nobody polls (tcp moves data only when its CQ is
//     read). Completions come out in posting order per queue whatever
//     order libfabric reports them in. Errors read with fi_cq_readerr
//     become verbs statuses (FI_ETRUNC: local length error; FI_EACCES,
//     FI_ENOKEY: remote access error; FI_ECANCELED and a lost connection:
//     flushed; ...), with the fi_errno in VendorErr. Over the verbs
//     provider, whose fi_errno is FI_EIO for every error but a flush, the
//     ibv_wc_status it reports as prov_errno decides the status and is
//     the VendorErr: the device's own verdict.
//   - QP: the verbs state machine is kept in Go over the endpoint's life. A
//     QP in RESET or INIT has no endpoint; Dial (fi_connect) or Accept
//     (fi_accept, from a passive endpoint's FI_CONNREQ) opens one, binds its
//     CQs and the event queue, and moves the QP to RTS on FI_CONNECTED.
//     Reject is fi_reject; a rejection reaches the dialer as a
//     *provider.RejectError with the private data. goverbs' header in the
//     connection data carries the QP numbers, initial PSNs and IRD/ORD;
//     the ORD, fences (SendFence) and posting order are enforced in Go.
//     Entering ERR shuts the endpoint down and closes it, so libfabric gives
//     every operation back; the ones it did not complete are flushed, in
//     posting order. Modify to RTR fails with ErrNotSupported: endpoints
//     connect only through the connection manager (Caps.ManualConnect is
//     false).
//
// The opcodes, as Device.Info names the calls:
//
//   - SEND, SEND_WITH_IMM: fi_sendmsg (the immediate as remote CQ data).
//   - WRITE: fi_writemsg; READ: fi_readmsg. A zero-length WRITE or READ
//     names no remote memory, so no key is checked.
//   - WRITE_WITH_IMM: fi_writemsg with remote CQ data where that consumes a
//     receive (mode FI_RX_CQ_DATA, the verbs provider); elsewhere the WRITE
//     followed by a zero-length SEND carrying the immediate and the WRITE's
//     length, which the provider orders after the WRITE (FI_ORDER_SAW) and
//     which consumes the receive as verbs says (tcp and sockets deliver
//     remote CQ data without consuming a receive).
//   - COMPARE_SWAP, FETCH_ADD, ATOMIC_WRITE: fi_compare_atomicmsg,
//     fi_fetch_atomicmsg, fi_atomicmsg on FI_UINT64, where fi_query_atomic
//     says the domain has them (sockets; not tcp in 1.17, and never the
//     verbs provider: see below). The target
//     address must be 8-byte aligned (checked at the initiator: providers
//     do not).
//   - FLUSH, SEND_WITH_INV, LOCAL_INV, BIND_MW and memory windows are not in
//     libfabric 1.x: Caps.Opcodes leaves them out, PostSend refuses them
//     with ErrNotSupported and AllocMW fails with it.
//
// With 8 bytes of CQ data (tcp, sockets) goverbs also carries the solicited
// bit; with 4 (verbs) it cannot, and WaitSolicited wakes on every receive.
//
// # Completion levels
//
// By default a SEND, WRITE or ATOMIC WRITE is posted with
// FI_DELIVERY_COMPLETE where the provider offers it: its completion means
// the peer has the data (Caps.WriteCompletion is CompletionPlaced), and an
// operation the peer never took (it died, it refused the access) completes
// in error. The spec option completion=transmit uses the provider's default
// instead: a completion means the source buffer may be reused
// (CompletionLocal), as fi_pingpong does.
//
// # What the providers of libfabric 1.17 cannot show
//
// The conformance suite runs over fabric:tcp and fabric:sockets; what it
// cannot check there is skipped by name with the reason, and this
// package's own tests check what happens instead:
//
//   - tcp answers an invalid remote access (bad rkey, range or right), or a
//     message longer than the receive, by closing the connection: the
//     initiator's WR and everything after it are flushed and
//     EventPeerDisconnected is raised, instead of a remote access or invalid
//     request error. The target's memory is never touched.
//   - libfabric endpoints have no access flags: a QP's access flags are kept
//     (Query reports them) but only the region's rights are enforced.
//   - sockets does not tell the sender of a truncated message, and its
//     delivery completion means the peer's provider buffered the message.
//   - Neither has RNR: a SEND that finds no receive waits at the receiver.
//
// # The verbs provider (rxe0 and siw0 in the lab)
//
// Over libfabric's verbs provider (FI_EP_MSG: one RC QP per endpoint,
// connected by librdmacm on the device's IP address, e.g.
// "verbs?domain=rxe0" listening on 10.77.2.1) the conformance suite runs
// in the RDMA lab (scripts/interop/fabricverbs.sh; docs/interop.md). The
// provider wants FI_MR_LOCAL, FI_MR_VIRT_ADDR, FI_MR_ALLOCATED and
// FI_MR_PROV_KEY: regions are addressed by virtual address, the device
// picks the rkeys, and descriptors go with every SGE. It gives SEND,
// WRITE, READ, and over RoCE SEND_WITH_IMM and WRITE_WITH_IMM (4 bytes of
// CQ data, FI_RX_CQ_DATA); 4 local SGEs, inline data up to inject_size
// (256 on rxe0, 2 on siw0). It refuses, with ErrNotSupported:
//
//   - every atomic: libfabric 1.17's verbs atomics post wrong operands
//     (see quirks.noAtomics), so Caps.Opcodes has none;
//   - over iWARP (fabric "Ethernet-iWARP"), SEND_WITH_IMM and
//     WRITE_WITH_IMM (no CQ data) and a READ into more than one SGE: an
//     iWARP RDMA Read Request names one data sink, and libfabric does not
//     report the device's max_sge_rd;
//   - what no libfabric provider has (see the opcodes above).
//
// libfabric's registration cache is turned off (FI_MR_CACHE_MAX_COUNT=0
// unless the environment sets it): the verbs provider's cache registers
// every region with all remote rights and hands one registration to every
// fi_mr_reg of the same memory. A device refuses to open, with
// ErrNotSupported, if the cache is on anyway. With 4 bytes of CQ data or
// none, WaitSolicited wakes on every receive; endpoints have no access
// flags. The suite's skips over rxe0 and siw0, each with its reason, are
// in conformance_test.go (providerGaps): the rest are the device's (rxe's
// status for a SEND too long, iWARP's unacknowledged SENDs and WRITEs, no
// RNR) or named by the suite from Caps.
//
// # Errors
//
// A failed libfabric call returns an *Error: errors.Is matches it against
// its verbs class (verbs.ErrInvalidArgument, ErrNotSupported, ErrBusy,
// ErrRejected, ...), its Errno (libfabric's fi_errno) and the
// syscall.Errno of the same value.
//
// # Buffers and concurrency
//
// Work requests are copied at post time (inline data included); the memory
// their SGEs name belongs to libfabric until the WR completes, and a region
// posted WRs use cannot be deregistered (ErrBusy). Every method is safe
// for concurrent use. A CQ polled continuously is left to its poller; the
// progress goroutine reads the others, spinning briefly after activity and
// otherwise blocking on the CQs' wait objects (FI_WAIT_FD).
//
// # Goroutines and lock order
//
// Three kinds of goroutine call into the package: the application's (every
// SPI method), the device's event loop (connection events: eqEvent of QPs
// and listeners) and its completion loop (reads idle CQs, retries stalled
// QPs); short-lived ones run a deferred teardown (time.AfterFunc), fail
// the QPs of a CQ in error (devcore.CQ.FailQPs) and finish a teardown an
// error completion asked for. Each type's Locks paragraph says which
// fields they touch. When a goroutine holds several locks, it takes them
// in this order:
//
//	Listener.mu → Device.eqMu
//	PD.mu → CQ.fcqMu → CQ.pollMu → QP.mu → keyTable.mu, progress.mu,
//	        devcore.CQ (a CQ's ring), devcore.Events → progress.wakeMu
//
// Device.mu and qpTable.mu are leaves, taken with no other lock held.
// CQ.pollMu is only tried (TryLock) by the completion loop and by Wait, so
// a poller never waits behind it for the loop. No goroutine holds two QPs'
// locks, or a QP's while it closes an endpoint (fi_close waits for the
// provider, which may be delivering to that QP's CQ).
//
// # Provider bugs worked around
//
// libfabric 1.17's verbs provider reads the descriptor of every entry of a
// descriptor array it is given, so an inline operation (FI_INJECT, whose
// copy has no region) is posted with none; its atomics and registration
// cache are avoided as above.
//
// libfabric 1.17's sockets provider copies the fi_info of an endpoint
// shallowly (the package keeps it alive for the endpoint's life) and closes
// a connection's socket twice when fi_shutdown is called (the package never
// calls fi_shutdown on sockets; closing the endpoint tells the peer).
package fabric
