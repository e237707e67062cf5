// Package xstack is an exchange between two goverbs devices of different
// stacks, to show that they are each other's peer on the wire: goverbs'
// rdma-core backend on the kernel's rxe0 against goverbs' pure-Go roce
// (through the IB CM), and on siw0 against pure-Go iwarp (issue 15). Any
// two goverbs devices whose Dial and Listen meet can run it.
//
// Each side registers a region of 2×Size bytes that the peer may WRITE
// (the first half) and READ (the second half, filled beforehand), and
// advertises it in its first SEND (16 bytes: address, R_Key, length, big
// endian, as rping does). The client (the active side) then
//
//  1. WRITEs Size bytes into the server's first half and SENDs Size
//     bytes: the server checks both once the SEND arrives (a SEND is
//     placed after the WRITE before it);
//  2. READs the server's second half and checks it;
//
// and the server does the same toward the client, then SENDs a last
// message, on which the client disconnects. Every byte of every
// operation is checked by the side that ends it, each with a pattern of
// its own, so a byte out of place or a stale buffer shows.
package xstack
