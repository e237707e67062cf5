package shm

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/provider"
)

// local is this side's half of a connection: the control segment we
// write, which belongs to the connection and is released by close. Its
// memfd is kept only until it was shared: the mapping keeps the memory,
// and a connection then holds no descriptor for its own segment (at
// 10,000 QPs, 10,000 fewer). Doorbells travel on the connection's socket
// (layout_linux.go): a connection holds one descriptor, the socket.
type local struct {
	buf   []byte // our read-write mapping of the segment
	segFd int    // the segment's memfd until shareable closed it, then -1
	seg   segment
}

// newLocal allocates and seals a control segment.
func newLocal(g geometry) (*local, error) {
	buf, fd, err := allocSegment(g.size())
	if err != nil {
		return nil, err
	}
	l := &local{buf: buf, segFd: fd, seg: segment{b: buf, g: g}}
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

// shareable returns the descriptor to send to the peer: a read-only
// descriptor of the segment (opened anew through /proc, so the peer cannot
// even ask for write access with fcntl), which the caller closes after
// sending. It is called once per connection, and closes the segment's
// memfd: nobody needs it any more.
func (l *local) shareable() (seg int, err error) {
	if l.segFd < 0 {
		return -1, fmt.Errorf("%w: the control segment was shared already", provider.ErrInvalidState)
	}
	ro, err := reopenReadOnly(l.segFd)
	if err != nil {
		return -1, err
	}
	unix.Close(l.segFd)
	l.segFd = -1
	return ro, nil
}

func (l *local) close() {
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

// remote is the peer's half as we see it: its segment mapped read-only.
type remote struct {
	mem *mem.Region
	seg segment
}

// mapRemote maps the peer's segment. It takes ownership of the
// descriptor, and closes it, on error too: the mapping keeps the memory.
func mapRemote(segFd int) (*remote, error) {
	defer unix.Close(segFd)
	b, r, err := mapSealed(segFd)
	if err != nil {
		return nil, err
	}
	seg, err := parseSegment(b)
	if err != nil {
		r.Close()
		return nil, err
	}
	return &remote{mem: r, seg: seg}, nil
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

func (r *remote) close() {
	r.mem.Close()
}
