// Package provider is what a device implementation shares: the names of the
// service-provider interface (SPI) it implements, and the rules every
// provider must apply the same way.
//
// The vocabulary (access flags, opcodes, work requests and completions, QP
// attributes and states, capabilities, errors) and the interfaces a
// provider implements are declared in [github.com/goverbs/goverbs/verbs],
// where users read them with go doc; this package gives them the names a
// provider writes (provider.Device for [verbs.ProviderDevice],
// provider.SendWR for [verbs.SendWR], ...) as aliases, so that the two
// packages always agree. What is here and nowhere else:
//
//   - post-time checks of work requests against the QP's and the device's
//     limits ([CheckSendWR], [CheckRecvWR], [PostTarget]);
//   - the QP state machine's transition table and attribute checks
//     ([CheckTransition], [CheckQPAttr]);
//   - the IBA timer tables ([RNRTimer], [AckTimeout]) and SGE arithmetic
//     ([Length]).
//
// A provider may be the shared software device
// [github.com/goverbs/goverbs/soft] with a link (loopback, iWARP over TCP,
// RoCEv2 over UDP, shared memory) plugged in, or a backend onto real RDMA
// hardware. This package imports only verbs and the standard library.
//
// Ownership: slices inside a work request (the SGE list) belong to the
// caller; a provider copies what it needs before PostSend or PostRecv
// returns. Memory described by an SGE or a registered region is read and
// written by the provider until the work request completes.
package provider
