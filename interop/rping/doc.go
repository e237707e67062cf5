// Package rping speaks the protocol of rdma-core's rping (librdmacm
// examples/rping.c, v44.0) over a goverbs device, so that a goverbs program
// and the real rping are each other's client and server — over iWARP
// against Linux siw in particular. docs/interop.md §1 is the specification,
// with citations into rping.c.
//
// One ping, for a buffer of Size bytes:
//
//  1. the client SENDs a 16-byte advertisement (address, rkey, size; all
//     big-endian) of its start buffer, filled with rping's pattern;
//  2. the server RDMA READs that many bytes into its own buffer and SENDs
//     16 zero bytes ("go ahead");
//  3. the client advertises its sink buffer the same way;
//  4. the server RDMA WRITEs what it read (strlen + 1 bytes, which is the
//     whole buffer for rping's pattern) into the sink and says go ahead;
//  5. the client compares the sink with the start buffer (rping -V).
//
// Both sides of this package check every byte: the server checks what it
// READ against the pattern of the ping's number (real rping servers check
// nothing), the client compares the sink with the start buffer. The client
// ends by disconnecting (a TCP FIN over iWARP, as siw does); the server
// ends when the peer disconnects between pings.
//
// The connection asks for IRD = ORD = 1, as rping does: an rping server's
// RDMA READ needs the client to offer an IRD of at least 1.
package rping
