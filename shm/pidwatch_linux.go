package shm

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/provider"
)

// pidWatch is the link's watch of one peer process: one pidfd and one
// goroutine for every connection of the link to that process, however
// many (a server with 5,000 connections from one client process holds one
// descriptor for them, not 5,000).
//
// Lock order: link.watchMu, then pidWatch.mu. The watcher goroutine takes
// mu (never watchMu with it held) while it tells the connections, so a
// connection that stops watching (Detach) waits until the watcher is done
// with it and is never told afterwards.
type pidWatch struct {
	pid  int
	f    *os.File      // the pidfd; closed by the last connection's unwatch
	done chan struct{} // closed when the watcher goroutine ended

	mu    sync.Mutex
	conns map[*conn]struct{} // the connections to tell; guarded by mu
}

// peerWatch returns the watch of process pid, made and started if there
// was none, with its mu held for the caller to add its connection; nil
// when the kernel has no pidfds.
func (l *link) peerWatch(pid int) *pidWatch {
	l.watchMu.Lock()
	defer l.watchMu.Unlock()
	if w := l.watches[pid]; w != nil {
		w.mu.Lock()
		return w
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil
	}
	w := &pidWatch{pid: pid, f: os.NewFile(uintptr(fd), "pidfd"), done: make(chan struct{}), conns: make(map[*conn]struct{})}
	rc, err := w.f.SyscallConn()
	if err != nil {
		w.f.Close()
		return nil
	}
	if l.watches == nil {
		l.watches = make(map[int]*pidWatch)
	}
	l.watches[pid] = w
	go l.watchLoop(w, rc)
	w.mu.Lock()
	return w
}

// watchLoop is the watcher goroutine of w: it waits until the process
// exits (a pidfd polls readable then) or the last connection closed the
// pidfd, and tells every connection of the first.
func (l *link) watchLoop(w *pidWatch, rc interface {
	Read(func(uintptr) bool) error
}) {
	defer close(w.done)
	first := true
	err := rc.Read(func(uintptr) bool {
		defer func() { first = false }()
		return !first
	})
	if err != nil {
		return // closed: nobody watches any more
	}
	// New connections to a process with this pid (a later one, once the
	// pid is reused) get a watch of their own.
	l.watchMu.Lock()
	if l.watches[w.pid] == w {
		delete(l.watches, w.pid)
	}
	l.watchMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.conns {
		if !c.detached.Load() {
			c.peerClosed.Store(true)
			c.peerLeft(fmt.Errorf("%w: shm peer process %d exited", provider.ErrDisconnected, w.pid))
		}
	}
}

// unwatch stops telling c of its peer's exit. The last connection of a
// watch closes its pidfd and waits for its goroutine.
func (l *link) unwatch(w *pidWatch, c *conn) {
	l.watchMu.Lock()
	w.mu.Lock()
	delete(w.conns, c)
	last := len(w.conns) == 0
	w.mu.Unlock()
	if last && l.watches[w.pid] == w {
		delete(l.watches, w.pid)
	}
	l.watchMu.Unlock()
	if last {
		w.f.Close()
		<-w.done
	}
}
