// Package verbs is goverbs' public API: RDMA's verbs model (libibverbs and
// librdmacm) in idiomatic Go.
//
// A program opens a Device from a provider value — loopback.New() for QPs in
// one process, or a transport such as iWARP over TCP — allocates a
// protection domain, registers memory, creates completion queues and
// reliable-connected queue pairs, connects them (Listen/Dial, or Modify by
// hand), posts work requests and polls or waits for their completions.
//
// The contracts this package keeps, and a program may rely on:
//
//   - Authorization: a peer reaches memory only through an rkey of a region
//     or window of the QP's protection domain, within its bounds, with the
//     rights it grants and the QP grants. Keys, QP numbers and initial PSNs
//     come from crypto/rand.
//   - Lifetime: a region referenced by posted work cannot be deregistered
//     (ErrBusy); after Deregister returns no peer access reaches it. A PD,
//     CQ or window still used by another object cannot be closed (ErrBusy).
//     Closing twice returns ErrClosed and changes nothing.
//   - Posting is not completing: PostSend and PostRecv queue work and
//     return; every failed WR, and every signalled WR, produces exactly one
//     WorkCompletion, in posting order per queue.
//   - Completion levels are separate claims. Caps.WriteCompletion says what
//     a WRITE's completion proves on the device (local, acknowledged or
//     placed). A receive completion of a SEND or WRITE with immediate proves
//     every earlier WRITE of the QP is placed. Only FLUSH proves global
//     visibility or persistence. Delivery to the peer application is
//     something only the application's own protocol can prove.
//   - Errors: a failing WR completes with a Status from the verbs set and
//     moves the QP to ERR; every outstanding WR then completes with
//     StatusWRFlushErr in posting order. Invalid calls return typed errors
//     (see Err*) that errors.Is also matches against the errno libibverbs
//     would return; nothing panics.
//
// Buffers: the SGE lists of work requests are copied by PostSend and
// PostRecv and not retained; the memory they name belongs to the device
// until the work request completes. Poll fills a slice the caller owns and
// never allocates. To post without allocating, keep the []SendWR and []SGE
// slices across calls.
//
// Concurrency: every method is safe for concurrent use. Completions of one
// CQ are returned in order to whichever goroutine polls.
//
// # Providers
//
// A device comes from a [Provider] value that a transport package returns
// (loopback.New(), iwarp.New(), roce.New(), shm.New()). The interfaces
// named Provider* (ProviderDevice, ProviderQP, ...) are what a transport or
// a hardware backend implements; a program never calls them: this package
// wraps them with argument checks, object lifetimes and typed errors. They
// live here, beside the vocabulary they share with this API, so that every
// type a program fills in is documented where it is imported; package
// provider gives implementers the same types under shorter names.
package verbs

// RNRRetryForever is the rnr_retry value that retries a receiver-not-ready
// SEND forever.
const RNRRetryForever = 7
