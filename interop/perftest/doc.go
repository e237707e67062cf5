// Package perftest makes goverbs a peer of perftest's RC tests
// (ib_write_lat, ib_write_bw, ib_read_lat, ib_read_bw, ib_send_lat,
// ib_send_bw; perftest 4.5, the version the lab's Debian ships), as client
// or server, over any goverbs device. docs/interop.md §3 is the
// specification, with citations into perftest's sources.
//
// perftest exchanges no test parameters: both sides must be started with
// the same test, size and iterations. What crosses the out-of-band channel
// is, in lock-step (the client writes first, the server answers):
//
//   - V: the version string ("6.06", 16 bytes), the cycle buffer and cache
//     line sizes, the port MTU;
//   - H: a key (struct pingpong_dest: LID, out_reads, QPN, PSN, rkey,
//     vaddr, GID), as 108 bytes of text over TCP or a 56-byte binary
//     struct over rdma_cm; each test runs a fixed number of them;
//   - B: after a bandwidth test, the client's report;
//   - "done" at the end, over TCP.
//
// Without rdma_cm (Config.CM false; RoCE, against rxe) the channel is a TCP
// connection and the data QP is connected by hand: INIT, then RTR and RTS
// with the peer's GID, QPN and PSN (perftest's ctx_connect). With rdma_cm
// (perftest -R; required over iWARP, against siw) the channel is itself an
// RC connection made through the connection manager, carrying each
// message as a SEND, and the data QP is connected by a second connection
// on the same port; SEND bandwidth then uses perftest's credits, since an
// iWARP SEND that finds no receive is fatal (Config.Credits).
//
// The test loops follow perftest's run_iter_* functions, so that either
// side can be perftest: write_lat's last-byte counter that each side spins
// on (the server writes first), read_lat's one READ at a time, send_lat's
// ping-pong (the client first), and the bandwidth client's TxDepth
// operations in flight with one completion in CQMod. perftest never checks
// the data it moves (it is random), so neither can its peer: a goverbs side
// checks what the protocol defines — the counter bytes, every completion's
// status and length.
package perftest
