//go:build linux

package roce

import (
	"encoding/binary"
	"net"
	"net/netip"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// batchSize is how many datagrams one sendmmsg or recvmmsg moves at most
// (wireguard-go's conn.IdealBatchSize is 128; 64 keeps a batch of 4 KiB
// packets within the default socket buffers).
const batchSize = 64

// tuneSocket sets the options that make the ICRC computable and the
// buffers deep enough for a window of full-MTU packets, and returns the
// receive buffer the kernel granted. IP_PMTUDISC_DO sets DF, and with DF an
// unconnected socket sends IPv4 Identification 0 (Linux
// ip_select_ident_segs), which the ICRC covers (WIRE.md 2.7).
func tuneSocket(uc *net.UDPConn, c *config) (int, error) {
	uc.SetReadBuffer(c.SocketBuffer) // the kernel caps these; not an error
	uc.SetWriteBuffer(c.SocketBuffer)
	rc, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var serr error
	rcvbuf := 0
	err = rc.Control(func(fd uintptr) {
		rcvbuf, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		if c.addr.Addr().Is4() {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
			return
		}
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
		if serr == nil {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_DONTFRAG, 1)
		}
	})
	if err != nil {
		return 0, err
	}
	return rcvbuf, serr
}

// batchConn is the Linux PacketConn: recvmmsg and sendmmsg through the
// runtime's poller, gathering each datagram from the caller's pieces
// without copying, and UDP GSO/GRO when the kernel has them.
type batchConn struct {
	uc      *net.UDPConn
	rc      syscall.RawConn
	local   netip.AddrPort
	v6      bool
	offload bool
	r, w    mmsg // reader's and writer's state, never shared
	p       mmsg // TryReadBatch's state: the turn's holder's (drive.go)
}

// mmsg is the kernel-facing state of one direction: message headers,
// iovecs, socket addresses and control buffers, allocated once and reused.
type mmsg struct {
	c     *batchConn
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6 // large enough for either family
	ctrl  []byte                  // ctrlLen bytes per message
	ms    []Message
	done  int
	err   error
	fn    func(fd uintptr) bool // bound once, so calls do not allocate
	tryFn func(fd uintptr)      // TryReadBatch's, bound once too
}

// ctrlLen holds one UDP_SEGMENT or UDP_GRO control message.
var ctrlLen = unix.CmsgSpace(4)

func newBatchConn(uc *net.UDPConn, c *config) (PacketConn, bool) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil, false
	}
	b := &batchConn{uc: uc, rc: rc, local: localAddrPort(uc), v6: c.addr.Addr().Is6()}
	if c.gso {
		b.offload = enableGRO(rc)
	}
	b.r.init(b)
	b.w.init(b)
	b.p.init(b)
	b.r.fn = b.r.recv
	b.w.fn = b.w.send
	b.p.tryFn = b.p.tryRecv
	return b, true
}

// enableGRO turns UDP_GRO on if the kernel also has UDP_SEGMENT.
func enableGRO(rc syscall.RawConn) bool {
	ok := false
	rc.Control(func(fd uintptr) {
		if _, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_SEGMENT); err != nil {
			return
		}
		ok = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
	})
	return ok
}

func (m *mmsg) init(c *batchConn) {
	m.c = c
	m.hdrs = make([]unix.Mmsghdr, batchSize)
	m.iovs = make([]unix.Iovec, batchSize*4)
	m.names = make([]unix.RawSockaddrInet6, batchSize)
	m.ctrl = make([]byte, batchSize*ctrlLen)
}

func (b *batchConn) LocalAddr() netip.AddrPort { return b.local }
func (b *batchConn) Offload() bool             { return b.offload }
func (b *batchConn) Close() error              { return b.uc.Close() }
func (b *batchConn) Backlogged() bool          { return backlogged(b.uc) }

// backlogged reports whether bytes wait in the receive queue of c's
// socket (SIOCINQ: for UDP, the length of the first datagram; for TCP, the
// bytes not read yet; zero when it is empty).
func backlogged(c syscall.Conn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n > 0
}

// ReadBatch receives up to len(ms) datagrams with one recvmmsg.
func (b *batchConn) ReadBatch(ms []Message) (int, error) {
	m := &b.r
	m.prepareRead(ms)
	if err := b.rc.Read(m.fn); err != nil {
		return 0, err
	}
	return m.finishRead()
}

// TryReadBatch receives the datagrams already queued, up to len(ms), with
// one recvmmsg that does not wait; it returns 0 when none is. It runs in
// the raw conn's Control, not its Read: a Read holds the descriptor's read
// lock while the reader goroutine is parked in the poller, and this must
// not wait for that. It has its own message state (b.p), so it never
// shares headers with ReadBatch; the engine's poll hand-off (drive.go)
// keeps the two from reading at the same time, which keeps batches in the
// socket's order.
func (b *batchConn) TryReadBatch(ms []Message) (int, error) {
	m := &b.p
	m.prepareRead(ms)
	if err := b.rc.Control(m.tryFn); err != nil {
		return 0, err
	}
	return m.finishRead()
}

// SetReadDeadline makes a ReadBatch that is waiting, or the next one,
// return an error wrapping os.ErrDeadlineExceeded once t passes.
func (b *batchConn) SetReadDeadline(t time.Time) error { return b.uc.SetReadDeadline(t) }

// prepareRead fills the message headers for receiving into ms.
func (m *mmsg) prepareRead(ms []Message) {
	b := m.c
	m.ms = ms[:min(len(ms), batchSize)]
	for i := range m.ms {
		buf := m.ms[i].Buffers[0]
		m.iovs[i] = unix.Iovec{Base: unsafe.SliceData(buf)}
		m.iovs[i].SetLen(len(buf))
		h := &m.hdrs[i].Hdr
		*h = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&m.names[i])), Namelen: unix.SizeofSockaddrInet6, Iov: &m.iovs[i]}
		h.SetIovlen(1)
		if b.offload {
			h.Control = &m.ctrl[i*ctrlLen]
			h.SetControllen(ctrlLen)
		}
	}
	m.done, m.err = 0, nil
}

// finishRead decodes what recvmmsg wrote into the messages.
func (m *mmsg) finishRead() (int, error) {
	if m.err != nil {
		return 0, m.err
	}
	for i := 0; i < m.done; i++ {
		msg := &m.ms[i]
		msg.N = int(m.hdrs[i].Len)
		msg.Addr = sockaddrToAddrPort(&m.names[i])
		msg.Segment = 0
		if m.c.offload {
			msg.Segment = groSize(m.ctrl[i*ctrlLen:][:m.hdrs[i].Hdr.Controllen])
		}
	}
	return m.done, nil
}

// recv is the raw read callback: false asks the poller to wait.
func (m *mmsg) recv(fd uintptr) bool {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&m.hdrs[0])), uintptr(len(m.ms)), 0, 0, 0)
		switch errno {
		case 0:
			m.done = int(n)
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // park in the poller
		}
		m.err = &net.OpError{Op: "recvmmsg", Net: "udp", Err: errno}
		return true
	}
}

// tryRecv is the Control callback of TryReadBatch: one recvmmsg with
// MSG_DONTWAIT; nothing queued leaves m.done 0.
func (m *mmsg) tryRecv(fd uintptr) {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&m.hdrs[0])), uintptr(len(m.ms)), unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
			m.done = int(n)
			return
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return
		}
		m.err = &net.OpError{Op: "recvmmsg", Net: "udp", Err: errno}
		return
	}
}

// WriteBatch sends ms with as few sendmmsg calls as the batch size allows.
func (b *batchConn) WriteBatch(ms []Message) (int, error) {
	var first error
	for sent := 0; sent < len(ms); {
		k := min(len(ms)-sent, batchSize)
		m := &b.w
		m.ms = ms[sent : sent+k]
		if err := m.prepareWrite(); err != nil {
			return sent, err
		}
		m.done, m.err = 0, nil
		if err := b.rc.Write(m.fn); err != nil {
			return sent, err
		}
		if first == nil {
			first = m.err
		}
		sent += k
	}
	return len(ms), first
}

// prepareWrite fills the message headers for m.ms.
func (m *mmsg) prepareWrite() error {
	nio := 0
	for i := range m.ms {
		nio += len(m.ms[i].Buffers)
	}
	if nio > len(m.iovs) {
		m.iovs = make([]unix.Iovec, nio+nio/2)
	}
	io := 0
	for i := range m.ms {
		msg := &m.ms[i]
		first := io
		for _, p := range msg.Buffers {
			if len(p) == 0 {
				continue
			}
			m.iovs[io] = unix.Iovec{Base: unsafe.SliceData(p)}
			m.iovs[io].SetLen(len(p))
			io++
		}
		h := &m.hdrs[i].Hdr
		*h = unix.Msghdr{}
		h.Name, h.Namelen = m.c.putSockaddr(&m.names[i], msg.Addr)
		if io > first {
			h.Iov = &m.iovs[first]
			h.SetIovlen(io - first)
		}
		if msg.Segment > 0 && m.c.offload {
			c := m.ctrl[i*ctrlLen:][:ctrlLen]
			putSegment(c, msg.Segment)
			h.Control = &c[0]
			h.SetControllen(len(c))
		}
	}
	return nil
}

// send is the raw write callback. A datagram the kernel refuses is
// skipped, so one bad message never blocks the rest of the batch.
func (m *mmsg) send(fd uintptr) bool {
	for m.done < len(m.ms) {
		n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&m.hdrs[m.done])), uintptr(len(m.ms)-m.done), 0, 0, 0)
		switch errno {
		case 0:
			m.done += int(n)
			continue
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		case unix.EIO:
			// wireguard-go: a device that cannot segment fails GSO
			// sends with EIO; stop offloading, the transport resends.
			if m.ms[m.done].Segment > 0 {
				m.c.offload = false
			}
		}
		if m.err == nil {
			m.err = &net.OpError{Op: "sendmmsg", Net: "udp", Addr: net.UDPAddrFromAddrPort(m.ms[m.done].Addr), Err: errno}
		}
		m.done++
	}
	return true
}

// putSockaddr writes ap into sa in the socket's family and returns the
// name pointer and length for a Msghdr.
func (b *batchConn) putSockaddr(sa *unix.RawSockaddrInet6, ap netip.AddrPort) (*byte, uint32) {
	if b.v6 {
		*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: ap.Addr().As16()}
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], ap.Port())
		return (*byte)(unsafe.Pointer(sa)), unix.SizeofSockaddrInet6
	}
	s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
	*s4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ap.Addr().Unmap().As4()}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&s4.Port))[:], ap.Port())
	return (*byte)(unsafe.Pointer(s4)), unix.SizeofSockaddrInet4
}

// sockaddrToAddrPort decodes the source address recvmmsg wrote.
func sockaddrToAddrPort(sa *unix.RawSockaddrInet6) netip.AddrPort {
	port := func(p *uint16) uint16 { return binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(p))[:]) }
	switch sa.Family {
	case unix.AF_INET:
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(s4.Addr), port(&s4.Port))
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port(&sa.Port))
	}
	return netip.AddrPort{}
}

// putSegment writes a UDP_SEGMENT control message (a uint16 in host order).
func putSegment(c []byte, size int) {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
	h.Level, h.Type = unix.IPPROTO_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(c[unix.CmsgLen(0):], uint16(size))
}

// groSize finds a UDP_GRO control message (an int in host order) and
// returns the segment size, or 0.
func groSize(c []byte) int {
	for len(c) >= unix.CmsgLen(0) {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
		l := int(h.Len)
		if l < unix.CmsgLen(0) || l > len(c) {
			return 0
		}
		if h.Level == unix.IPPROTO_UDP && h.Type == unix.UDP_GRO && l >= unix.CmsgLen(4) {
			return int(binary.NativeEndian.Uint32(c[unix.CmsgLen(0):]))
		}
		c = c[min(len(c), unix.CmsgSpace(l-unix.CmsgLen(0))):]
	}
	return 0
}
