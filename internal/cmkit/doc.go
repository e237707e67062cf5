// Package cmkit holds the connection-management rules every transport's
// CM shares, so that a transport's CM is its wire format and its
// handshake, and not another listener.
//
// # What a transport inherits
//
//   - The listener's queue (Queue): a backlog of requests held between
//     the moment the transport takes one in (Reserve: before it reads or
//     maps anything for it) and Accept; a request over the backlog is
//     refused at once (ReasonBacklogFull), or its dialer waits for room
//     (ReserveWait) where the dialer is in this process. Accept skips
//     requests nobody can answer any more (the dialer gave up, they
//     expired). Close refuses every request still queued, and is
//     idempotent: the first Close returns nil, a later one ErrClosed. A
//     listener whose accept loop stops for good closes with that error
//     (Fail), and Accept returns it rather than wait for requests that can
//     no longer come.
//   - Who answers a request (Claim): exactly one of Accept, Reject, the
//     dialer's give-up, expiry and the listener's Close; the losers see
//     ErrAnswered (ErrInvalidState).
//   - The dialer's watch (Watch), for a CM whose requests come over a
//     connection of their own (iwarp, roce's side channel, shm): a read of
//     the connection while the request waits, since a dialer sends nothing
//     before the answer; its end claims the request (ErrDialerGone, or
//     ErrDialerSpoke when the dialer broke the protocol), so Accept skips
//     it and the backlog drops it. A CM over datagrams (the IB CM) claims
//     a request itself when the dialer's REJ or DREQ comes.
//   - The half-open set (HalfOpen), where a transport reads requests off
//     sockets (iwarp, roce's side channel): connections accepted whose
//     request is not read yet, bounded in all and per source; a
//     connection over a bound evicts the oldest slow one (stalled before
//     silent, never one whose request has arrived while another can go),
//     not itself, and Close hands back the ones left to close.
//   - A listener over sockets (Sockets): the accept loop, the half-open
//     set and the queue put together, with Close and the loop's fatal end,
//     for a transport whose requests come over connections a
//     net.Listener accepts; the transport gives its handshake and refusal
//     (SocketHooks).
//   - The link's listeners and connections (CloseSet): Add fails once the
//     link has closed, so nothing made after Close escapes it, and Close
//     hands the members back once, to be closed outside the set's lock.
//   - The accept loop (Serve): temporary errors (out of descriptors or
//     buffers, a connection aborted before it was accepted) are retried
//     with backoff, as net/http's Server.Serve does; any other error stops
//     the loop and is returned, for Fail.
//   - Deadlines: a Dial or Accept whose context has no deadline gets the
//     transport's default (WithTimeout, DeadlineOf); a step that fails
//     because the deadline passed is ErrTimeout and matches the context's
//     error too (TimeoutOr, Expired), on every transport alike.
//   - Error mapping: an address in use is ErrBusy, any other listen
//     failure ErrInvalidArgument (ListenError, InUse); private data over
//     the transport's limit is ErrInvalidArgument (CheckPrivateData); a QP
//     of another device is ErrInvalidArgument (ForeignQP); a rejection
//     carries the rejecter's private data and reason (Rejected).
//
// # What a transport writes
//
//   - Its wire format: the request, the reply, the rejection and the
//     confirmation (RTU) as its peers expect them (MPA for iwarp, the CM
//     MADs for IB and RoCE, the hello over a Unix socket for shm, a
//     header in libfabric's connection data for fabric), and how its
//     rejection carries private data and a reason.
//   - Its handshake: how a request reaches the listener (a goroutine per
//     connection reading it within the transport's request timeout, an
//     event queue, a function call), what it checks before it queues the
//     request (the peer's credentials, its version), and what Accept and
//     Dial do to move the QPs to RTS (the IRD and ORD each side honours,
//     the PSNs, the endpoint the QP sends on).
//   - Its limits: the backlog, the default timeout, the longest private
//     data, the half-open bounds (HalfOpenLimits) where it reads requests
//     off sockets, and the source a per-source bound counts (iwarp cuts
//     IPv6 to a /64).
//   - How far a half-open peer got (its Pace): a peek at the socket that
//     knows the request's framing.
//
// Lock order: a transport's own listener lock comes before the Queue's
// (fabric offers requests and closes the queue with its listener's mu
// held); the Queue calls no transport code with its lock held but its
// pending function (an atomic load). A HalfOpen's lock is a leaf too: it
// calls only its pace function (a non-blocking peek) with it held.
package cmkit
