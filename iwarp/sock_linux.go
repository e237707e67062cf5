//go:build linux

package iwarp

import (
	"errors"
	"io"
	"net"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/wire/iw"
)

// rawSock is the fast path of a connection over a *net.TCPConn: readv and
// writev straight between the socket and the scattered buffers (registered
// memory, header scratch), non-blocking when asked, through the net
// package's poller so that deadlines and Close keep working.
//
// The read half belongs to whoever runs the receive path (the receive
// goroutine, or a waiter or poller it lent it to; drive.go) and the write half to the
// goroutine holding the send engine; they never share a field.
type rawSock struct {
	rc   syscall.RawConn
	busy bool

	// Read half.
	rspin         int64  // busy polling: when reads started to find nothing (UnixNano), 0 once one reads
	ryields       uint32 // busy polling: empty attempts past spinYieldAfter
	rpark         int64  // busy polling: how long reads find nothing before the next one parks (ns; busyPark)
	riov          [maxReadIov]unix.Iovec
	rn            int
	rblock        bool
	rdone         int
	rerr          syscall.Errno
	rwaited       bool
	readFn, waitR func(uintptr) bool
	parker        rxParker // readvIdle's, while it runs
	parked        bool     // parker holds no buffer: riov[0] is empty
	peek          [1]byte

	// Write half.
	wiov    []unix.Iovec // grown up to maxWriteIov as writes need
	wn      int
	wblock  bool
	wdone   int
	werr    syscall.Errno
	writeFn func(uintptr) bool
}

// Iovec limits: a read places one FPDU's payload (at most one piece per
// SGE of a WR) and reads ahead into the receive buffer; a write sends one
// batch of FPDUs (at most IOV_MAX pieces on Linux).
const (
	maxReadIov  = 64
	maxWriteIov = 1024
)

// spinYieldAfter is how long a busy-polling read finds nothing before every
// spinYieldEvery-th further attempt also yields the thread to the OS
// (sched_yield; yielding on every attempt doubled a one-process
// ping-pong's p50 on a loaded machine, see BENCHMARKS.md). Between
// the attempts the goroutine yields to the Go scheduler only, which keeps
// the thread: on a machine with fewer CPUs than spinning threads (both
// ends of a connection on 2 vCPUs, each with an application spinning on
// its CQ) the spinners then hold the CPUs the peer needs to send what they
// wait for, until the OS time-slices them, and every message waits
// milliseconds. A ping-pong's next message mostly comes within the bound.
// It parks only past its bound (busyParkMin below): a parked receive
// goroutine beside goroutines that spin with runtime.Gosched on every CPU
// waits for sysmon's netpoll, up to 10 ms.
const (
	spinYieldAfter = 20 * time.Microsecond
	spinYieldEvery = 16
)

// A busy-polling read parks in the netpoller once it has found nothing for
// its bound, which follows the connection's traffic: twice the wait that
// last ended with data, within [busyParkMin, busyParkMax]. Spinning is
// for a connection whose next message comes soon; spinning without end
// made every idle connection cost a CPU, and a process with many of them
// (16 dialers setting connections up, each end's receive goroutine
// spinning) spent its CPUs on the spinners instead of the connections
// that had work: 1,100 setups per second against 7,400 with the bound
// (BENCHMARKS.md §27). A sender whose next message comes regularly within
// busyParkMax keeps its receiver spinning; after an idle spell the first
// message costs a netpoller wake-up, as without BusyPoll.
const (
	busyParkMin = 50 * time.Microsecond
	busyParkMax = 200 * time.Microsecond
)

// spinYield is one empty turn of a busy-polling read. It reports whether
// the read has spun for its bound and should park.
func (s *rawSock) spinYield() (park bool) {
	runtime.Gosched()
	now := time.Now().UnixNano()
	switch {
	case s.rspin == 0:
		s.rspin = now
	case now-s.rspin > max(s.rpark, int64(busyParkMin)):
		return true
	case now-s.rspin > int64(spinYieldAfter):
		if s.ryields++; s.ryields%spinYieldEvery == 0 {
			unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	}
	return false
}

// spinEnded books a busy-polling read that found data after spinning: the
// next spin's bound is twice this wait.
func (s *rawSock) spinEnded() {
	if s.rspin == 0 {
		return
	}
	waited := time.Now().UnixNano() - s.rspin
	s.rpark = min(2*waited, int64(busyParkMax))
	s.rspin, s.ryields = 0, 0
}

// errWouldBlock reports a non-blocking call that found nothing to do.
var errWouldBlock = errors.New("iwarp: socket would block")

// newRawSock returns the fast path for c, or nil when c is not a TCP
// connection of package net.
func newRawSock(c net.Conn, busy bool) *rawSock {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	s := &rawSock{rc: rc, busy: busy}
	// Method values made once: passing them to RawConn allocates nothing.
	s.readFn, s.waitR, s.writeFn = s.doRead, s.doWaitRead, s.doWrite
	return s
}

// rxParker gives the receive buffer back while a read waits, and takes
// one back when the socket is readable (see readvIdle).
type rxParker interface {
	park()
	unpark() []byte
}

func (s *rawSock) doRead(fd uintptr) bool {
	if s.parked {
		s.parked = false
		b := s.parker.unpark()
		s.riov[0].Base = &b[0]
		s.riov[0].SetLen(len(b))
	}
	for {
		n, _, e := unix.Syscall(unix.SYS_READV, fd, uintptr(unsafe.Pointer(&s.riov[0])), uintptr(s.rn))
		if e == unix.EINTR {
			continue
		}
		if e == unix.EAGAIN && s.rblock {
			if s.parker != nil {
				// Nothing to read: wait without the buffer.
				s.riov[0] = unix.Iovec{}
				s.parker.park()
				s.parked = true
			}
			return false // park in the netpoller until readable
		}
		s.rdone, s.rerr = int(n), e
		return true
	}
}

// doWaitRead is the wait of waitReadable. RawRead resets the descriptor's
// readiness before the first call, so bytes that arrived between the
// caller's last EAGAIN and now have already spent their wake-up: the first
// call must look (a non-consuming, non-blocking peek) before it parks, or
// it sleeps until more bytes come, and a peer waiting for our answer sends
// none (the write-lat stall at 4 MiB, issue 11 item 7).
func (s *rawSock) doWaitRead(fd uintptr) bool {
	if s.rwaited {
		return true
	}
	s.rwaited = true
	// A raw recvfrom: unix.Recvfrom allocates its address.
	_, _, err := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&s.peek[0])), 1,
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	return err != unix.EAGAIN // readable, closed or failed: the caller reads and sees which
}

func (s *rawSock) doWrite(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&s.wiov[0])), uintptr(s.wn))
		if e == unix.EINTR {
			continue
		}
		if e == unix.EAGAIN && s.wblock {
			return false // park until writable
		}
		s.wdone, s.werr = int(n), e
		return true
	}
}

// fillIovec points iov at the non-empty buffers of bufs, at most len(iov)
// of them, and returns how many it filled.
func fillIovec(iov []unix.Iovec, bufs [][]byte) int {
	n := 0
	for _, b := range bufs {
		if len(b) > 0 && n < len(iov) {
			iov[n].Base = &b[0]
			iov[n].SetLen(len(b))
			n++
		}
	}
	return n
}

// readv reads into bufs (empty ones skipped). With block it parks in the
// netpoller (or spins, in busy-poll mode) until data arrives; without it
// returns errWouldBlock when none is there. It returns io.EOF at the end of
// the stream.
func (s *rawSock) readv(bufs [][]byte, block bool) (int, error) {
	n := fillIovec(s.riov[:], bufs)
	if n == 0 {
		return 0, nil
	}
	s.rn = n
	defer clear(s.riov[:n]) // drop the pointers into caller memory
	defer raceAcquire()
	park := false
	for {
		// Busy polling spins until its bound, then waits in the
		// netpoller as a plain read does.
		s.rblock = block && (!s.busy || park)
		if err := s.rc.Read(s.readFn); err != nil {
			return 0, err
		}
		switch {
		case s.rerr == unix.EAGAIN && block:
			park = s.spinYield() // busy-poll: try again
			continue
		case s.rerr == unix.EAGAIN:
			return 0, errWouldBlock
		}
		s.spinEnded()
		switch {
		case s.rerr != 0:
			return 0, s.rerr
		case s.rdone == 0:
			return 0, io.EOF
		}
		return s.rdone, nil
	}
}

// readvIdle reads into b, the whole free receive buffer when nothing is
// buffered, waiting for at least a byte as readv does; while it waits in
// the netpoller, p.park gives the buffer back, and p.unpark takes a new
// one (whose whole length is read into) when the socket is readable, so
// that an idle connection holds no receive buffer. Not for busy polling,
// which never parks. Once it returns, p holds a buffer again.
func (s *rawSock) readvIdle(b []byte, p rxParker) (int, error) {
	s.riov[0].Base = &b[0]
	s.riov[0].SetLen(len(b))
	s.rn = 1
	s.parker = p
	defer raceAcquire()
	s.rblock = true
	err := s.rc.Read(s.readFn)
	if s.parked { // woken by a deadline or Close, not data
		s.parked = false
		p.unpark()
	}
	s.parker = nil
	s.riov[0] = unix.Iovec{}
	switch {
	case err != nil:
		return 0, err
	case s.rerr != 0:
		return 0, s.rerr
	case s.rdone == 0:
		return 0, io.EOF
	}
	return s.rdone, nil
}

// waitReadable parks until the socket is readable (or a deadline or Close
// intervenes). In busy-poll mode it only yields (spinYield).
func (s *rawSock) waitReadable() error {
	if s.busy {
		s.spinYield()
		return nil
	}
	s.rwaited = false
	return s.rc.Read(s.waitR)
}

// writev writes bufs, which hold at most maxWriteIov non-empty pieces.
// With block it waits (parks, or spins in busy-poll mode) until at least
// one byte is written; without it, it returns errWouldBlock when the
// socket is full. A short count is not an error.
func (s *rawSock) writev(bufs [][]byte, block bool) (int, error) {
	if len(bufs) > len(s.wiov) {
		s.wiov = make([]unix.Iovec, min(max(len(bufs), 2*len(s.wiov), 16), maxWriteIov))
	}
	n := fillIovec(s.wiov, bufs)
	if n == 0 {
		return 0, nil
	}
	s.wn = n
	defer clear(s.wiov[:n])
	raceRelease()
	for {
		s.wblock = block && !s.busy
		if err := s.rc.Write(s.writeFn); err != nil {
			return 0, err
		}
		switch {
		case s.werr == unix.EAGAIN && block:
			runtime.Gosched()
			continue
		case s.werr == unix.EAGAIN:
			return 0, errWouldBlock
		case s.werr != 0:
			return 0, s.werr
		}
		return s.wdone, nil
	}
}

// peerShut reports, without consuming anything, whether the peer's FIN
// (or a reset) arrived, even behind bytes not read yet.
func (s *rawSock) peerShut() bool {
	shut := false
	s.rc.Control(func(fd uintptr) {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
		if n, err := unix.Poll(pfd, 0); err == nil && n > 0 {
			shut = pfd[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
		}
	})
	return shut
}

// peerGone reports, without consuming anything, whether the peer closed
// or reset the connection (an initiator that gave up waiting for its MPA
// Reply), or sent bytes it must not have sent yet.
func peerGone(c net.Conn) (gone, sentData bool) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return false, false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return false, false
	}
	var b [1]byte
	rc.Control(func(fd uintptr) {
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case err == unix.EAGAIN:
		case err != nil || n == 0:
			gone = true
		default:
			sentData = true
		}
	})
	return gone, sentData
}

// requestArrived reports, without consuming anything, how many bytes of
// the MPA Request are in the socket's receive queue, and whether they make
// a whole one (its header and the private data PD_Length announces, or a
// header announcing more than MPA allows: the handshake goroutine is about
// to read and settle it). It makes one non-blocking MSG_PEEK.
func requestArrived(c net.Conn) (n int, whole bool) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var b [iw.MPAHeaderSize + iw.MaxPrivateData]byte
	rc.Control(func(fd uintptr) {
		n, _, err = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	})
	if err != nil || n <= 0 {
		return 0, false
	}
	if n < iw.MPAHeaderSize {
		return n, false
	}
	pd := int(iw.MPAFrame(b[:n]).PDLength())
	return n, pd > iw.MaxPrivateData || n >= iw.MPAHeaderSize+pd
}

// pathMSS returns the connection's TCP maximum segment size, or 0.
func pathMSS(c net.Conn) int {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0
	}
	mss := 0
	rc.Control(func(fd uintptr) {
		mss, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG)
	})
	return mss
}

// tuneSocket bounds how long unacknowledged data may sit before the kernel
// declares the peer dead (TCP_USER_TIMEOUT), so that a peer that vanished
// without a reset ends in an error, never a hang.
func tuneSocket(c net.Conn, userTimeout time.Duration) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	// TCP_NODELAY is package net's default, and keepAlive is set by the
	// dialer or listener that made c: setting them again here cost five
	// system calls per connection.
	if rc, err := tc.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(userTimeout/time.Millisecond))
		})
	}
}

// busyPoll reports whether the connection spins instead of parking.
func (s *rawSock) busyPoll() bool { return s.busy }

// peerSilentFor reports whether the kernel has received nothing from the
// peer, neither data nor an acknowledgement, for at least d (TCP_INFO's
// last_data_recv and last_ack_recv): the peer's host, not only its
// process, is unreachable. ok is false when it cannot tell.
func peerSilentFor(c net.Conn, d time.Duration) (silent, ok bool) {
	tc, isTCP := c.(*net.TCPConn)
	if !isTCP {
		return false, false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return false, false
	}
	var ti *unix.TCPInfo
	if rc.Control(func(fd uintptr) { ti, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }) != nil || err != nil {
		return false, false
	}
	ms := uint32(d / time.Millisecond)
	return ti.Last_data_recv >= ms && ti.Last_ack_recv >= ms, true
}
