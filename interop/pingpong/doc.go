// Package pingpong speaks the protocol of rdma-core's ibv_rc_pingpong
// (libibverbs/examples/rc_pingpong.c, v44.0) over a goverbs device that
// connects QPs by hand, so that a goverbs program and the real
// ibv_rc_pingpong are each other's client and server — over RoCEv2
// against Linux rxe in particular. docs/interop.md §2 is the
// specification.
//
// The two sides first exchange their addresses over TCP (port 18515): the
// client sends "LID:QPN:PSN:GID" as 52 bytes of text, the server connects
// its QP (RTR, RTS) and answers in kind, the client sends "done". Then the
// client SENDs first and each side SENDs its next message once its last
// SEND and a receive have completed, so exactly one message is in flight.
// Both sides receive into the buffer they send from, so a side echoes what
// it received.
//
// Data is checked on every receive, every byte. ibv_rc_pingpong's buffer
// holds 0x7b everywhere (and, with its -c, 0 at the start of each 4 KiB
// page), which its echo preserves; a goverbs client sends a different
// pattern each iteration and checks that the echo returns it exactly; a
// goverbs server accepts either.
package pingpong
