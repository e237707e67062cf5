// Package iw owns the iWARP wire formats goverbs speaks over TCP: the MPA
// start-up frames and FPDU framing with its CRC32c (RFC 5044, RFC 6581), the
// DDP tagged and untagged headers (RFC 5041), and the RDMAP headers and
// Terminate vocabulary (RFC 5040), plus the RFC 7306 extensions (atomics and
// immediate data) and the goverbs capability block that announces them
// inside MPA private data.
//
// Headers are typed views over []byte in the style of gVisor's
// pkg/tcpip/header: a view such as [DDPTagged] has accessors and setters, a
// matching Fields struct with an Encode method builds it, and IsValid (or a
// Parse function) must succeed before any accessor is called. Accessors never
// copy and never allocate, so the data path can decode and encode headers in
// place; no function in this package panics on any input that has passed its
// validity check.
//
// Byte order is network order everywhere except the MPA CRC field, which
// travels little-endian (see [PutTrailer]).
//
// The package knows nothing about sockets, queues or memory regions: it
// validates what a header says and tells the caller which Terminate
// (layer, error type, error code) a malformed header must produce, via
// [TermOf]. Deciding what the message means is the engine's job.
package iw
