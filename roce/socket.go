package roce

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/goverbs/goverbs/provider"
)

// Message is one datagram crossing the socket seam.
//
// Ownership: on WriteBatch the caller owns Buffers and everything they point
// to; the conn may read them only until WriteBatch returns. On ReadBatch the
// caller provides Buffers[0] and the conn writes the datagram into it.
type Message struct {
	// Buffers are, for a write, the pieces gathered into one datagram;
	// for a read, Buffers[0] receives it.
	Buffers [][]byte
	// N is the length of a datagram read.
	N int
	// Addr is the destination of a write and the source of a read.
	Addr netip.AddrPort
	// Segment, on a write, asks the kernel to cut the datagram into
	// datagrams of Segment bytes, the last possibly shorter (UDP GSO); on
	// a read it says the datagram is such a run of coalesced datagrams
	// (UDP GRO). Zero means one datagram. Only a conn whose Offload
	// reports true sets it on reads or accepts it on writes.
	Segment int
}

// PacketConn is the socket seam of a device: batched datagram I/O in the
// style of wireguard-go's conn.Bind. The device calls WriteBatch only while
// it holds its engine's turn (one caller at a time) and ReadBatch only from
// its reader goroutine.
type PacketConn interface {
	// ReadBatch reads at least one datagram, blocking until one arrives,
	// and returns how many messages it filled.
	ReadBatch(ms []Message) (int, error)
	// WriteBatch sends the messages in order and returns how many were
	// handed to the network. A datagram the network refuses (too long,
	// no route) is skipped; the error reports the first refusal.
	WriteBatch(ms []Message) (int, error)
	// LocalAddr is the bound address.
	LocalAddr() netip.AddrPort
	// Offload reports whether WriteBatch accepts Message.Segment and
	// ReadBatch may return coalesced datagrams.
	Offload() bool
	// Close unblocks ReadBatch, which then returns an error wrapping
	// net.ErrClosed.
	Close() error
}

// backlogger is implemented by sockets that can tell whether datagrams
// wait in the kernel, unread: a QP draining behind a barrier
// (qpConn.drainUntilBarrier) keeps waiting while they do, since its
// barrier may be among them.
type backlogger interface {
	Backlogged() bool
}

// errTooLong is returned for a message that does not fit a datagram.
var errTooLong = errors.New("roce: datagram longer than 65507 bytes")

// maxDatagram is the longest UDP payload over IPv4.
const maxDatagram = 65507

// listenUDP opens the device's socket: batched on Linux unless plain is
// set, one datagram per call elsewhere.
func listenUDP(c *config) (PacketConn, error) {
	network := "udp4"
	if c.addr.Addr().Is6() {
		network = "udp6"
	}
	uc, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(c.addr))
	if errors.Is(err, syscall.EADDRINUSE) {
		// The usual cause: a second device on the RoCEv2 port, whether
		// Linux rxe or another goverbs device. Say what to do about it.
		return nil, &OpError{Op: "listen", Addr: c.addr.String(), Err: fmt.Errorf(
			"%w: UDP %v is taken (by Linux rxe or another RoCE device on this host): "+
				"give this device another address, or port 0 for a free port that peers reach through "+
				"the connection manager (roce.Options{Addr: %q}): %v",
			provider.ErrBusy, c.addr, netip.AddrPortFrom(c.addr.Addr(), 0).String(), err)}
	}
	if err != nil {
		return nil, &OpError{Op: "listen", Addr: c.addr.String(), Err: err}
	}
	rcvbuf, err := tuneSocket(uc, c)
	if err != nil {
		uc.Close()
		return nil, &OpError{Op: "socket options", Addr: c.addr.String(), Err: err}
	}
	c.sizeWindow(rcvbuf)
	if !c.DisableBatching {
		if pc, ok := newBatchConn(uc, c); ok {
			return pc, nil
		}
	}
	return &plainConn{uc: uc, local: localAddrPort(uc)}, nil
}

func localAddrPort(uc *net.UDPConn) netip.AddrPort {
	ap := uc.LocalAddr().(*net.UDPAddr).AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// plainConn is the portable PacketConn: one system call per datagram, and
// a gathered datagram copied into one buffer first.
type plainConn struct {
	uc    *net.UDPConn
	local netip.AddrPort
	wbuf  []byte // used by the writer only
}

func (p *plainConn) LocalAddr() netip.AddrPort { return p.local }
func (p *plainConn) Offload() bool             { return false }
func (p *plainConn) Close() error              { return p.uc.Close() }
func (p *plainConn) Backlogged() bool          { return backlogged(p.uc) }

func (p *plainConn) ReadBatch(ms []Message) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	n, addr, err := p.uc.ReadFromUDPAddrPort(ms[0].Buffers[0])
	if err != nil {
		return 0, err
	}
	ms[0].N, ms[0].Addr, ms[0].Segment = n, netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port()), 0
	return 1, nil
}

func (p *plainConn) WriteBatch(ms []Message) (int, error) {
	var first error
	for i := range ms {
		b, err := p.flatten(ms[i].Buffers)
		if err == nil {
			_, err = p.uc.WriteToUDPAddrPort(b, ms[i].Addr)
		}
		if err != nil {
			if isClosed(err) {
				return i, err
			}
			if first == nil {
				first = err
			}
		}
	}
	return len(ms), first
}

// flatten gathers bufs into the conn's write buffer.
func (p *plainConn) flatten(bufs [][]byte) ([]byte, error) {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	if n > maxDatagram {
		return nil, errTooLong
	}
	if cap(p.wbuf) < n {
		p.wbuf = make([]byte, n, max(n, 4352))
	}
	b := p.wbuf[:0]
	for _, piece := range bufs {
		b = append(b, piece...)
	}
	return b, nil
}

func isClosed(err error) bool { return errors.Is(err, net.ErrClosed) }
