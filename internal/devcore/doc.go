// Package devcore holds the rules of an RDMA device that keeps its work
// queues and completion queues in Go, in one place: soft (the software
// device every pure-Go link plugs into) and fabric (libfabric, whose
// endpoints move the data but whose queues goverbs keeps) both use it, so
// the verbs queue rules exist once. See docs/architecture.md for the three
// kinds of SPI implementer and what each gets from this package.
//
// What it holds:
//   - Ring: a work queue of WQEs indexed by monotonic sequence numbers,
//     with in-order retirement (an unsignalled WR that succeeds produces no
//     completion), flush in posting order and discard on reset.
//   - CQ: the completion ring with the verbs overrun rule (the completion
//     that finds the ring full puts the CQ in error, once), solicited
//     counting, level-triggered Wait, and the set of QPs completing into it.
//   - Events: the asynchronous event channel that never blocks its sender
//     and says how many events it dropped.
//   - The QP and region rules both providers apply the same way: queue
//     capacities, Modify's checks and attribute copy, Query's view,
//     registration and re-registration arguments.
//
// A backend whose NIC owns the queues and completions (rdma-core) uses only
// the last group and Events: its rings and CQs are the hardware's.
//
// Locks: Ring has none (its owner's QP lock guards it); CQ.mu and
// Events.mu are leaves: nothing is called with them held, so a provider
// may push completions or raise events with its own locks held.
package devcore
