// Package ib owns the InfiniBand transport-layer wire formats that goverbs
// speaks inside UDP port 4791 (RoCEv2): the Base Transport Header (BTH), the
// extension headers of the Reliable Connected service (RETH, AETH,
// AtomicETH, AtomicAckETH, ImmDt, IETH and the IBTA 1.5 FETH; DETH for UD),
// the RC opcode table, the AETH syndrome vocabulary and its timers, 24-bit
// packet sequence numbers, and the invariant CRC (ICRC).
//
// Headers are typed views over []byte in the style of gVisor's
// pkg/tcpip/header: a view such as [BTH] has accessors and setters, a matching
// Fields struct with an Encode method builds it, and IsValid (or
// [ParsePacket]) must succeed before any accessor is called. Accessors never
// copy and never allocate, so the data path decodes and encodes in place. No
// function in this package panics on any input that passed its validity
// check; [ParsePacket] accepts any byte slice.
//
// All fields are big-endian except the ICRC, which travels little-endian
// (see [PutICRC]).
//
// References: the InfiniBand Architecture Specification Volume 1 ("IBA"),
// chapter 9 for the transport headers and 7.8 for the ICRC; Annex A17
// (RoCEv2) for the IP and UDP fields the ICRC covers; Release 1.5 for FLUSH
// and ATOMIC WRITE. Where the specification text is not public, comments
// cite the Linux soft-RoCE driver (drivers/infiniband/sw/rxe), which is what
// goverbs must interoperate with.
//
// # The ICRC and the IPv4 Identification field
//
// The ICRC masks the IP fields a router may rewrite (TOS, TTL and header
// checksum; IPv6 traffic class, flow label and hop limit) but not the IPv4
// Identification or the flags. A stack on ordinary UDP sockets therefore
// cannot verify the ICRC of an arbitrary IPv4 peer exactly: no socket option
// reveals the ID of a received datagram, and Linux rxe sends non-zero IDs.
// [ICRCFromAddrs] and [VerifyICRCFromAddrs] reconstruct the headers from the
// addresses and ports a socket does report, assuming what a Linux kernel
// sends from an unconnected UDP socket with DF set (IP_PMTUDISC_DO): ID 0, DF
// set, no options. That is exact for IPv6, exact for IPv4 peers that send that
// way (goverbs itself), and wrong for rxe and hardware over IPv4, whose
// packets need the real header ([ICRC], from a raw or packet socket) or no
// check at all.
package ib
