// Package soft is the software RDMA device that every pure-Go transport
// plugs a link into.
//
// It owns what RDMA hardware owns on an adapter: the key table (lkeys,
// rkeys, QP numbers and initial PSNs from crypto/rand, retired keys not
// reused soon), every access check (key, bounds with overflow, region
// rights, QP access flags, protection domain, atomic alignment), the QP
// state machine, the send and receive queues, fence and ORD, completion
// generation in posting order, and flushing on error.
//
// A Link moves work between QPs: loopback within a process, iWARP over
// TCP, RoCEv2 over UDP, shared memory between processes. The Link and
// Endpoint interfaces (link.go) state the contract between this package and
// a link: which goroutine calls what, who owns each work queue element, and
// which checks the link must ask this package to make.
//
// The queue rules themselves (rings, in-order retirement, flush, the CQ
// ring) are internal/devcore's, which fabric uses too.
//
// # Goroutines and lock order
//
// Two kinds of goroutine call into the package: the application's (the
// SPI methods) and the link's (NextSend, CompleteSend, NextRecv,
// CompleteRecv, Access, Fail, Establish, QPByNumber, from its engine and
// connection manager goroutines); a CQ that overruns fails its QPs on a
// goroutine of its own (devcore.CQ.FailQPs). Each type's Locks paragraph
// says which fields they touch. When a goroutine holds several locks, it
// takes them in this order:
//
//	QP.mu → keyTable.mu, devcore.CQ (a CQ's ring), devcore.Events
//
// Device.mu is a leaf, taken with no other lock held. Never two QPs' locks
// at once: a link that moves work between two QPs (loopback) holds
// neither while it copies. Endpoint methods and MemoryLink hooks are
// called with no lock of this package held, so a link may call back into
// the device from them.
package soft
