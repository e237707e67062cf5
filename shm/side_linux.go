package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/provider"
)

// local is this side's half of a connection: the control segment we write
// and the eventfd our engine sleeps on. Both belong to the connection and
// are released by close. The segment's memfd is kept only until it was
// shared: the mapping keeps the memory, and a connection then holds no
// descriptor for its own segment (at 10,000 QPs, 10,000 fewer).
type local struct {
	buf    []byte // our read-write mapping of the segment
	segFd  int    // the segment's memfd until shareable closed it, then -1
	seg    segment
	efd    *os.File // our doorbell; nonblocking, read through the netpoller
	efdRaw int      // its descriptor, for writes (os.File.Fd would make it blocking)
}

// newLocal allocates and seals a control segment and a doorbell.
func newLocal(g geometry) (*local, error) {
	buf, fd, err := allocSegment(g.size())
	if err != nil {
		return nil, err
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Munmap(buf)
		unix.Close(fd)
		return nil, fmt.Errorf("shm: eventfd: %w", err)
	}
	l := &local{buf: buf, segFd: fd, seg: segment{b: buf, g: g}, efd: os.NewFile(uintptr(efd), "shm-doorbell"), efdRaw: efd}
	l.seg.format()
	return l, nil
}

// allocSegment makes a control segment of at least size bytes: a memfd
// sealed against resizing (the peer checks that it cannot shrink under
// its mapping), mapped read-write here, and then sealed with
// F_SEAL_FUTURE_WRITE, so that nobody can map it writable or write(2) it
// any more: only this mapping writes it.
func allocSegment(size int) ([]byte, int, error) {
	fd, err := unix.MemfdCreate("goverbs-shm", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, -1, fmt.Errorf("shm: control segment: memfd_create: %w", err)
	}
	n := roundUp(size, os.Getpagesize())
	var buf []byte
	if err = unix.Ftruncate(fd, int64(n)); err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	}
	if err == nil {
		buf, err = unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE)
		if err != nil {
			unix.Munmap(buf)
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, -1, fmt.Errorf("shm: sealing the control segment (Linux 5.1 or later): %w", err)
	}
	return buf, fd, nil
}

// shareable returns descriptors to send to the peer: a read-only
// descriptor of the segment (opened anew through /proc, so the peer cannot
// even ask for write access with fcntl) and the doorbell. The caller closes
// the first after sending. It is called once per connection, and closes
// the segment's memfd: nobody needs it any more.
func (l *local) shareable() (seg, efd int, err error) {
	if l.segFd < 0 {
		return -1, -1, fmt.Errorf("%w: the control segment was shared already", provider.ErrInvalidState)
	}
	ro, err := reopenReadOnly(l.segFd)
	if err != nil {
		return -1, -1, err
	}
	unix.Close(l.segFd)
	l.segFd = -1
	return ro, l.efdRaw, nil
}

func (l *local) close() {
	l.efd.Close()
	unix.Munmap(l.buf)
	if l.segFd >= 0 {
		unix.Close(l.segFd)
	}
}

// reopenReadOnly opens a new O_RDONLY descriptor of the file behind fd.
func reopenReadOnly(fd int) (int, error) {
	ro, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("shm: reopening descriptor read-only: %w", err)
	}
	return ro, nil
}

// remote is the peer's half as we see it: its segment mapped read-only and
// its doorbell.
type remote struct {
	mem *mem.Region
	seg segment
	efd int
}

// mapRemote maps the peer's segment and adopts its doorbell. It takes
// ownership of both descriptors, on error too.
func mapRemote(segFd, efd int) (*remote, error) {
	defer unix.Close(segFd)
	if err := checkEventfd(efd); err != nil {
		unix.Close(efd)
		return nil, err
	}
	b, r, err := mapSealed(segFd)
	if err != nil {
		unix.Close(efd)
		return nil, err
	}
	seg, err := parseSegment(b)
	if err != nil {
		r.Close()
		unix.Close(efd)
		return nil, err
	}
	return &remote{mem: r, seg: seg, efd: efd}, nil
}

// mapSealed maps a peer's memfd read-only after checking it cannot shrink
// under us (which would turn our reads into SIGBUS).
func mapSealed(fd int) ([]byte, *mem.Region, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return nil, nil, fmt.Errorf("%w: peer's control segment is not a memfd sealed against shrinking", provider.ErrProtocol)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, nil, fmt.Errorf("shm: fstat peer segment: %w", err)
	}
	if st.Size < offTable || st.Size > 1<<32 {
		return nil, nil, fmt.Errorf("%w: peer segment of %d bytes", provider.ErrProtocol, st.Size)
	}
	r, err := mem.Map(fd, int(st.Size), false)
	if err != nil {
		return nil, nil, fmt.Errorf("shm: mapping peer segment: %w", err)
	}
	return r.Bytes(), r, nil
}

// checkEventfd makes sure a descriptor from the peer is an eventfd, so
// ringing it cannot block or write into something else.
func checkEventfd(fd int) error {
	buf := make([]byte, 64)
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf)
	if err != nil || string(buf[:n]) != "anon_inode:[eventfd]" {
		return fmt.Errorf("%w: peer's doorbell is not an eventfd", provider.ErrProtocol)
	}
	return nil
}

func (r *remote) close() {
	unix.Close(r.efd)
	r.mem.Close()
}

// ring writes 1 to an eventfd. EAGAIN (the counter is saturated) means the
// sleeper is woken anyway.
func ring(efd int) {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	for {
		_, err := unix.Write(efd, one[:])
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}
