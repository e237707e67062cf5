// Package rdmacore is goverbs' backend for verbs devices: the verbs API of
// package verbs over rdma-core's libibverbs and librdmacm, the libraries
// every RDMA NIC on Linux is driven through (mlx5, efa, bnxt_re, irdma,
// hns) and the kernel's software devices rxe (Soft-RoCE) and siw
// (soft-iWARP).
//
// The package needs cgo and the build tag rdmacore (and libibverbs-dev,
// librdmacm-dev); without them it builds as a stub whose New returns an
// error wrapping provider.ErrNotSupported:
//
//	go test -tags rdmacore ./rdmacore/
//
// A Provider names a device; each verbs.Open of it opens a verbs context
// of its own:
//
//	p, err := rdmacore.New("rxe0") // or "verbs:siw0", "mlx5_0"
//	dev, err := verbs.Open(p)
//
// # How verbs maps onto rdma-core
//
//   - Caps: ibv_query_device_ex and ibv_query_port of port 1, nothing
//     assumed. DataPath is software for the devices the kernel registers
//     as virtual (rxe, siw: /sys/devices/virtual/infiniband), hardware for
//     those with a bus parent. max_inline_data, which the kernel does not
//     report, is probed with a QP at open.
//   - Opcodes: SEND, WRITE, READ everywhere; SEND and WRITE with immediate
//     on InfiniBand and RoCE (iWARP has no immediate data); compare-and-swap
//     and fetch-and-add when atomic_cap is not IBV_ATOMIC_NONE. The others
//     (SEND_WITH_INV, LOCAL_INV, BIND_MW, FLUSH, ATOMIC_WRITE) are refused at
//     post time with ErrNotSupported, as are memory windows, until goverbs
//     maps them.
//   - MR: ibv_reg_mr of the caller's memory, pinned with runtime.Pinner for
//     the region's life, or of package mem's, held open. A region named by
//     a posted WR cannot be deregistered (ErrBusy) until its completion.
//     verbs.PD.RegisterDmabuf is ibv_reg_dmabuf_mr, for memory another
//     driver exported (a GPU's); rxe and siw refuse it (ErrNotSupported).
//   - CQ: ibv_create_cq with a completion channel of its own; Wait arms the
//     CQ and waits for the channel's fd in Go's netpoller (a goroutine
//     parks, not an OS thread).
//   - QP: ibv_create_qp of type RC. The device sees a sequence number as
//     wr_id; the QP's ring maps it back to the caller's ID, the opcode of a
//     failed completion, and the queue's occupancy, so ErrQueueFull and the
//     post-time checks are goverbs' own (package provider), all-or-nothing.
//   - Connections: librdmacm (RDMA_PS_TCP) on the device's IPv4 addresses,
//     with the QP the caller created: iWARP moves it to RTS in the kernel,
//     RoCE through rdma_init_qp_attr and rdma_establish. The device's
//     rdma_cm event channel is read through the netpoller too.
//   - Events: ibv_get_async_event on the context's async fd (netpoller) and
//     rdma_cm's DISCONNECTED, into Device.Events.
//
// # cgo, not a cgo-free loader
//
// ibv_post_send, ibv_post_recv and ibv_poll_cq are static inline in
// <infiniband/verbs.h>: they jump through ctx->ops, so a loader without
// cgo (purego) would have to replicate struct ibv_context's, ibv_qp's and
// ibv_cq's layouts and call the providers' function pointers itself. One
// call of an exported libibverbs function (ibv_wc_status_str), medians of
// 5 interleaved rounds on a shared 2-core host: cgo 95 ns, 0 allocs;
// purego.SyscallN 222 ns, 1 alloc; purego.RegisterFunc 756 ns, 3 allocs
// (both CGO_ENABLED=0). The hot path would pay that per post and per
// poll, and allocate. Nothing blocks in C (CQ and CM waits park in the
// netpoller), so cgo costs the crossing alone (52 ns). goverbs' own
// post+poll of one WR against a stand-in device (cost_test.go): 393 ns,
// 0 allocs; 85 ns per WR posted 32 at a time. BENCHMARKS.md §17.
//
// # Private data
//
// The InfiniBand CM carries private data in fixed-size fields (56 bytes
// in a REQ after rdma_cm's header, 196 in a REP, 148 in a REJ): on RoCE a
// peer receives the whole field, its tail zero-filled, not the length
// sent. iWARP's MPA carries the length (at most 252 bytes with MPA v2).
package rdmacore
