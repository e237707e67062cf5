// Package shm is the same-host shared-memory transport of goverbs: a link
// for the soft RDMA device whose peers are processes on the same machine,
// connected by a Unix domain socket and sharing memory through memfds. It
// runs on Linux (5.1 or later: memfd seals, SCM_RIGHTS); elsewhere
// Open fails with an error matching ErrNotSupported.
//
//	p := shm.New() // or shm.New(shm.Options{...})
//	dev, err := verbs.Open(p) // then Listen / Dial as with any transport
//
// # Where the bytes go
//
// A region registered over memory with a descriptor — mem.Alloc's memfd,
// mem.MapFile's file — and granting a remote right is exported to every
// peer connected to a QP of its protection domain, and only to those: its
// descriptor travels over the connection's socket (SCM_RIGHTS) and the peer
// maps it. Nothing else of ours is ever mapped by a peer. Registration
// waits (up to 100 ms) until the connected peers have mapped the region, and
// Dial and Accept until each side has mapped the regions the other had
// registered, so that a peer told of a key goes direct from its first
// operation; a slower peer goes through the owner meanwhile. On such a region
// a peer's WRITE, READ, compare-and-swap, fetch-and-add, ATOMIC WRITE and
// FLUSH are performed by the peer's process itself, directly on its mapping:
// this process's CPU does nothing. Atomics are the CPU's own LOCK-prefixed
// instructions on the shared page, so they are atomic against atomics our
// own CPU runs on that memory (Caps.AtomicScope is AtomicGlobal). FLUSH to
// global visibility is a full memory barrier after the WRITEs; FLUSH to
// persistence of a file-backed region is msync(MS_SYNC) of the peer's
// mapping, which writes back the file's pages whoever dirtied them.
//
// Before each direct operation the initiator repeats every check the soft
// device would make (soft.CheckDescriptor: the target QP's state and access
// flags, the region's rights, bounds with overflow, atomic alignment)
// against descriptors the owner publishes in shared memory. When a check
// fails, when the key names nothing exported (Go memory, a memory window,
// an unknown or forged key), or when the region was revoked meanwhile, the
// request goes to the owner instead, through the connection's request
// ring: the owner's engine serves it with soft's own checks (QP.Access),
// fails its QP on a violation (the IBA class C rule: both QPs move to ERR)
// and answers with the verbs status. So every key works, and a violation
// has exactly soft's outcome; only the fast path is restricted to exported
// regions. SEND and WRITE with immediate always go through the ring, since
// receive buffers are not exported: the sender copies the payload into the
// ring in its own segment, the receiver's engine copies it into the posted
// receive (two copies; a WRITE with immediate to an exported region places
// its bytes directly and sends only the notice).
//
// A successful WRITE completion means the bytes are placed in the target's
// memory (Caps.WriteCompletion is CompletionPlaced). A SEND completes when
// the receiver consumed it into a receive. The receiver publishes that
// acknowledgement before its receive completes, and a sender whose peer
// leaves (closes its QP, exits, dies) applies every acknowledgement the
// peer published before it flushes what is left: a SEND the receiver got
// completes with success even when the receiver closes or exits the moment
// it polls the receive. Completions of one QP are
// delivered in posting order; a direct operation never overtakes ring
// requests posted before it on its QP (it waits for their
// acknowledgement), so a receive completion implies every earlier WRITE of
// the QP is placed, and a READ sees earlier WRITEs.
//
// # Connections
//
// Listen takes a socket path ("" picks one in the temporary directory, a
// leading "@" names Linux's abstract namespace); Dial connects to it.
// Requests, acceptances and rejections carry up to MaxPrivateData bytes of
// private data each way, and IRD/ORD are negotiated as librdmacm does.
// Every step is bounded by the context's deadline or Options.Timeout. By
// default only processes of the same user id may connect (SO_PEERCRED).
// QPs connect only this way: Caps.ManualConnect is false.
//
// Each side of a connection owns a control segment (a sealed memfd) that
// it alone writes and its peer maps read-only: the QP's published state, a
// table of region descriptors, a request ring and a response ring, and the
// positions and counters of the protocol. The layout, field by field, and
// the memory-ordering argument of every word are in layout_linux.go. A
// connection's engine serves the peer's requests and completes our ring
// requests. A goroutine that polls a CQ and finds it empty runs the engine
// of every connection whose QP completes into that CQ itself, then polls
// again: a busy-polling application is its own engine, with no hand-off to
// another goroutine and no second spinning thread (on a machine with as
// many CPUs as spinners, two processes on two CPUs, that is the difference
// between a SEND in about a microsecond and one in hundreds). Meanwhile the
// engine goroutine parks, looking again every Options.Spin (the Go timer's
// resolution may make that a millisecond), at once when the goroutine
// waits on the CQ instead (CQ.Wait, CQ.PollWait) or on a local event; so a
// message that arrives just after the application stopped polling without
// waiting can wait that long. Otherwise the engine goroutine does the work.
// In NotifyEvent mode (the default) it polls for Options.Spin after its last
// work, then sleeps on a doorbell that the peer rings only when it sees the
// engine asleep, once per sleep, with a message on the connection's socket
// (which the reader goroutine turns into the wake-up: a connection holds no
// descriptor but its socket); in NotifyPoll mode it never sleeps. Provider.SetNotify
// chooses per QP (the verbs API has no per-CQ transport option; each
// connected QP has its own engine). A stream of one-sided operations
// involves no engine at all.
//
// A QP's transport counters (verbs QP.Counters) say which path its work
// took: direct_ops and direct_bytes (performed on the peer's memory),
// ring_requests and ring_bytes (sent through the ring), served_requests
// (the peer's, served here), doorbells, engine_sleeps, polled_passes
// (engine passes that made progress on a goroutine polling a CQ),
// regions_exported and regions_imported.
//
// RNR: a SEND or WRITE with immediate that finds no receive waits at the
// receiver for the sender's rnr_retry periods of the receiver's
// min_rnr_timer (7: forever), then fails with RNR_RETRY_EXC_ERR
// (Caps.RNRRetry). A request to a QP that takes none (RESET, INIT, ERR)
// fails at once with RETRY_EXC_ERR rather than after retry_cnt timeouts.
//
// # Lifetime and revocation
//
// Deregister (and re-registration) revokes every peer's access before it
// returns. Each initiator announces a direct access in a busy word of its
// own segment and only then reads the region's descriptor; the owner kills
// the descriptor and then waits until no peer's busy word names the region.
// Whichever of the two stores comes first, the other side sees it (both are
// full barriers), so after Deregister returns no cooperating peer writes a
// byte of the region, and the peer is told to unmap it. Owner-served
// requests access the region through soft.Target, which Deregister drains.
// A READ the owner accepted is an access under way, as a direct READ is: it
// holds its whole range until its last fragment is in the response ring,
// so Deregister waits for it (one READ per connection at a time, copied at
// memory speed while the peer consumes) and the READ succeeds. Only the
// peer frees ring space: one that consumes nothing for Options.Timeout while
// a Deregister waits ends the connection, and Deregister returns. An
// owner-served WRITE is placed one fragment at a time, each under its own
// access, since the rest of it is the peer's to send: Deregister does not
// wait for it, and a later fragment fails with REM_ACCESS_ERR.
//
// The death of a peer process shows as the end of its socket (the kernel
// closes its descriptors) and, on kernels with pidfds, as its pidfd turning
// readable (which also covers a peer whose forked child still holds the
// socket): its QPs move to ERR at once, every outstanding work request the
// peer had not acknowledged completes with an error, and its regions are
// unmapped. A
// QP that enters ERR in the middle of sending a fragmented message ends the
// connection, since the peer would wait for the rest forever.
//
// A peer that is alive but does not run (stopped by SIGSTOP or a debugger)
// is not detected: the QP's Timeout and RetryCnt are not enforced on the
// ring. Its direct WRITEs, READs and atomics still complete (they need no
// CPU of the peer's), but a SEND, an owner-served request or anything that
// waits for the peer's engine stays outstanding, with the QP in RTS, until
// the peer runs again (then it completes) or dies (then it fails at once).
// iwarp and roce fail the same work with RETRY_EXC_ERR after the QP's
// retry budget.
//
// # What the operating system enforces, and what it cannot
//
// The OS enforces that a peer reaches only the regions exported to it (it
// holds no descriptor of anything else), and that a region exported
// read-only (remote read or flush rights without remote write or atomics)
// cannot be written by it: its mapping is PROT_READ from an O_RDONLY
// descriptor, so mprotect refuses to make it writable, and the memfd is
// sealed with F_SEAL_FUTURE_WRITE, so a writable mapping or a write(2)
// through any descriptor of it — even one reopened through /proc — fails.
// A write through the mapping faults. The seal is the memfd's for good:
// registering the same memory later with remote write still works, but
// peers cannot map it writable and reach it through its owner. Read-only
// regions over files, or over memfds that cannot be sealed, are not
// exported: they are served by their owner. The
// control segments are sealed the same way; peers' segments are mapped
// only after checking they are sealed against shrinking, so a peer cannot
// turn our reads into SIGBUS.
//
// The OS cannot revoke a mapping. Within an exported region, the rights,
// bounds, windows, QP flags and revocation are enforced by the
// initiator's code: a hostile peer process that bypasses this package can
// read or write every byte of a region exported to it writable, before and
// after Deregister, and can hold a revocation up (the owner then ends the
// connection after Options.Timeout and returns). Exported memory must be
// treated like memory given to the peer. Beyond that, the boundary between
// two processes of one user is the user id: a process that may ptrace us
// (same uid, Yama permitting) can read and write all our memory anyway.
package shm
