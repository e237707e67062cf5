// Package interop holds the programs that make goverbs a peer of the Linux
// kernel's own RDMA tools, each in a subpackage that speaks one tool's
// protocol over any goverbs device:
//
//   - rping: rdma-core's rping (buffer advertisements, RDMA READ and WRITE,
//     byte-for-byte validation) over a connection manager, for iWARP.
//   - pingpong: rdma-core's ibv_rc_pingpong (SEND/RECV ping-pong after an
//     out-of-band TCP exchange of LID, QPN, PSN and GID), for RoCEv2.
//   - perftest: perftest's ib_{write,read,send}_{lat,bw} exchange and test
//     loops, over TCP (RoCEv2) or over rdma_cm connections (-R, iWARP).
//
// docs/interop.md is the specification these follow, with citations into
// the tools' sources; scripts/interop.sh runs them against siw and rxe in
// the qemu lab. This package itself holds only this documentation.
package interop
