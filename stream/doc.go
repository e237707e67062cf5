// Package stream is a byte stream over RDMA: Listen returns a net.Listener
// and Dial a net.Conn over any *verbs.Device, so that net/http, gRPC or any
// io.Reader/Writer code runs over RDMA unchanged. It never falls back to
// TCP: if the device cannot set a stream up, Dial and Accept fail.
//
// The wire is librdmacm's rsocket protocol, so that a stream can talk to C
// programs using rsocket (rstream, riostream):
//
//   - Each side's connection private data is rsocket's 40-byte connection
//     data: version 1, flags, its receive queue depth as the peer's
//     credits, the address and rkey of its target SGL (two ring
//     descriptors the peer writes), and the first half of its receive ring.
//   - Data is written by RDMA into the peer's ring, half by half; each
//     message is a 32-bit word (3-bit opcode, 29-bit argument) carried as
//     the immediate of the WRITE, or, in rsocket's iWARP mode (every iWARP
//     device, any device without WRITE WITH IMMEDIATE, or Config.SendMode),
//     in a 4-byte SEND after a plain WRITE.
//   - The receiver returns credits as its reader consumes: an SGL message
//     whose argument is the sequence number up to which the sender may
//     send, written together with the descriptor of the half of the ring
//     that became free.
//   - CloseWrite sends a shutdown control message (the peer reads io.EOF
//     and may still write); Close sends a disconnect.
//
// Flow control: a Write copies into a registered send ring and returns; the
// bytes are posted as soon as the peer's credits, its ring and the send
// queue allow, by the writer or, when credits arrive later, by the
// connection's progress goroutine, so small writes made while the peer is
// slow are coalesced into one message. A full send ring blocks Write.
// Whatever one pass may send (several data messages, a control message,
// credits) goes to the device in one PostSend, which a transport that
// writes its socket as work is posted (iwarp, roce) turns into one system
// call. Both rings default to 1 MiB (rsocket's are 128 KiB): each side
// declares its own sizes in the connection data, so any size talks to
// rsocket.
//
// Concurrency: every method of Conn is safe for concurrent use; Reads are
// served one at a time, as are Writes, and Close, deadlines and CloseWrite
// may be called from any goroutine. Close returns every blocked Read and
// Write at once with net.ErrClosed; deadline errors are net.Errors whose
// Timeout is true and that match os.ErrDeadlineExceeded.
package stream
