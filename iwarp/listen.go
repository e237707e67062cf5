package iwarp

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// maxQueued bounds the requests a listener holds for the application
// (MPA Request read, no Accept or Reject yet): beyond it a new request is
// refused with a Reject Reply. Each waits at most MPATimeout, and only a
// peer that sent a well-formed Request gets here.
const maxQueued = 256

// listener accepts TCP connections, reads their MPA Requests and queues
// them for Accept.
//
// Ownership of a connection, which decides who may close it:
//   - acceptLoop takes it from the kernel and registers it in the
//     half-open set (half, bySrc) before its handshake goroutine starts.
//   - While it is in the half-open set its handshake goroutine reads the
//     MPA Request from it, but whoever takes it out of the set owns it: the
//     handshake goroutine itself (leave) when the Request is read or has
//     failed, or acceptLoop evicting it (the set is full) or Close, which
//     then close the socket to stop the read, and the handshake goroutine
//     only cleans up its wrapper.
//   - From leave to push (or a refusal) the handshake goroutine owns it.
//   - Once pushed, the connReq owns it; whoever claims the request (Accept,
//     Reject, expiry, Close refusing it) owns it, and after Accept's
//     QP.Establish the QP's endpoint does. The listener never touches a
//     claimed request's connection again.
type listener struct {
	link    *link
	ln      net.Listener
	avail   chan struct{} // a request was queued (capacity 1)
	done    chan struct{}
	once    sync.Once
	waiting atomic.Int32 // requests pushed (or being pushed) and not claimed

	mu    sync.Mutex // guards half, bySrc, queue
	half  list.List  // of *halfOpen, oldest first: connections whose MPA Request is being read
	bySrc map[netip.Addr]*list.List
	queue []*connReq // requests waiting for Accept; claimed ones are skipped
}

// halfOpen is a connection in its MPA exchange, before its Request is read.
type halfOpen struct {
	raw      net.Conn
	src      netip.Addr // its source, cut to a /64 for IPv6
	deadline time.Time  // the whole Request is due by then

	// Guarded by listener.mu.
	all, same *list.Element // in listener.half, in its source's list
	gone      bool          // taken out of the set: by leave, eviction or Close
}

func (l *link) Listen(d *soft.Device, addr string) (provider.Listener, error) {
	ln, err := (&net.ListenConfig{KeepAliveConfig: keepAlive}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("%w: listen on %s: %w", provider.ErrBusy, addr, err)
		}
		return nil, fmt.Errorf("%w: listen on %s: %w", provider.ErrInvalidArgument, addr, err)
	}
	lis := &listener{link: l, ln: ln, avail: make(chan struct{}, 1), done: make(chan struct{}),
		bySrc: make(map[netip.Addr]*list.List)}
	if !l.trackListener(lis, true) {
		ln.Close()
		return nil, provider.ErrClosed
	}
	go lis.acceptLoop()
	return lis, nil
}

// Addr is the address the listener is bound to, with the real port when
// it listened on port 0.
func (lis *listener) Addr() string { return lis.ln.Addr().String() }

func (lis *listener) Accept(ctx context.Context) (provider.ConnRequest, error) {
	for {
		if r := lis.pop(); r != nil {
			return r, nil
		}
		select {
		case <-lis.avail:
		case <-lis.done:
			return nil, provider.ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// push queues a request for Accept, dropping the ones already claimed (by
// expiry); it fails once the listener is closed.
func (lis *listener) push(r *connReq) bool {
	lis.mu.Lock()
	select {
	case <-lis.done:
		lis.mu.Unlock()
		return false
	default:
	}
	q := lis.queue[:0]
	for _, x := range lis.queue {
		if x.state.Load() == reqPending {
			q = append(q, x)
		}
	}
	lis.queue = append(q, r)
	lis.mu.Unlock()
	select {
	case lis.avail <- struct{}{}:
	default:
	}
	return true
}

// pop takes the oldest request still pending, or returns nil.
func (lis *listener) pop() *connReq {
	lis.mu.Lock()
	defer lis.mu.Unlock()
	for len(lis.queue) > 0 {
		r := lis.queue[0]
		lis.queue[0] = nil
		lis.queue = lis.queue[1:]
		if r.state.Load() == reqPending {
			if len(lis.queue) > 0 {
				select { // more for another Accept
				case lis.avail <- struct{}{}:
				default:
				}
			}
			return r
		}
	}
	return nil
}

// Close stops listening and refuses the requests nobody answered. It
// closes only the connections the listener still owns: those in their MPA
// exchange and the queued requests nobody claimed.
func (lis *listener) Close() error {
	err := error(provider.ErrClosed)
	lis.once.Do(func() {
		err = nil
		close(lis.done)
		lis.ln.Close()
		lis.link.trackListener(lis, false)
		lis.mu.Lock()
		var shaking []net.Conn
		for e := lis.half.Front(); e != nil; e = e.Next() {
			h := e.Value.(*halfOpen)
			h.gone = true
			shaking = append(shaking, h.raw)
		}
		lis.half.Init()
		clear(lis.bySrc)
		queued := lis.queue
		lis.queue = nil
		lis.mu.Unlock()
		for _, c := range shaking {
			c.Close() // its handshake goroutine fails and ends
		}
		for _, r := range queued {
			r.refuse(nil) // a no-op for a request already claimed
		}
	})
	return err
}

func (lis *listener) acceptLoop() {
	for {
		c, err := lis.ln.Accept()
		if err != nil {
			select {
			case <-lis.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return
		}
		cfg := &lis.link.cfg
		h := &halfOpen{raw: c, src: sourceOf(c.RemoteAddr()),
			deadline: time.Now().Add(min(cfg.requestTimeout, cfg.mpaTimeout))}
		evicted, ok := lis.admit(h)
		for _, x := range evicted {
			x.h.raw.Close() // its handshake goroutine fails and ends
			lis.link.refused(x.h.raw.RemoteAddr().String(), x.why)
		}
		if !ok {
			c.Close()
			return
		}
		go lis.handshake(h)
	}
}

// eviction is a half-open connection admit took out of the set, and why.
type eviction struct {
	h   *halfOpen
	why error
}

// admit adds h to the half-open set. When the set holds maxHalfOpen, or
// is under pressure (see underPressure) and h's source already has
// maxHalfOpenPerSource connections there, the oldest slow one (of all, or
// of that source; see slowest) is evicted to make room, rather than h
// refused: an attacker holding slots with silent or dribbling connections
// then only shortens the time each has, and a peer that sends its Request
// at once, as an honest one does, still gets in. It fails once the
// listener is closed.
//
// The per-source bound bites only under pressure: many honest dialers
// behind one address (a client host opening hundreds of connections at
// once, a NAT) have each been accepted before they were scheduled to
// write their Request, and evicting them while the listener has room to
// spare would turn them away for nothing.
func (lis *listener) admit(h *halfOpen) ([]eviction, bool) {
	cfg := &lis.link.cfg
	lis.mu.Lock()
	defer lis.mu.Unlock()
	select {
	case <-lis.done:
		return nil, false
	default:
	}
	var out []eviction
	same := lis.bySrc[h.src]
	if same == nil {
		same = list.New()
		lis.bySrc[h.src] = same
	}
	if same.Len() >= cfg.maxHalfOpenPerSource && lis.underPressure() {
		old := slowest(same)
		lis.evictLocked(old)
		out = append(out, eviction{old, fmt.Errorf("%w: evicted: %d connections from %v in their MPA exchange, the oldest goes",
			provider.ErrLimit, cfg.maxHalfOpenPerSource, h.src)})
	}
	if lis.half.Len() >= cfg.maxHalfOpen {
		old := slowest(&lis.half)
		lis.evictLocked(old)
		out = append(out, eviction{old, fmt.Errorf("%w: evicted: %d connections in their MPA exchange, the oldest goes",
			provider.ErrLimit, cfg.maxHalfOpen)})
	}
	if lis.bySrc[h.src] == nil { // evicting emptied it
		lis.bySrc[h.src] = same
	}
	h.all = lis.half.PushBack(h)
	h.same = same.PushBack(h)
	return out, true
}

// underPressure reports whether the half-open set is at least half full,
// the point from which one source may not take more than its share of
// what is left. Below it, a single flooding source can hold at most half
// the set; the other half stays for everyone else. Called with mu held.
func (lis *listener) underPressure() bool {
	return lis.half.Len() >= lis.link.cfg.maxHalfOpen/2
}

// evictScan bounds how many of the oldest half-open connections admit
// looks at for one to evict (one MSG_PEEK each, under listener.mu).
const evictScan = 16

// slowest picks the connection of l (oldest first) to evict, among the
// evictScan oldest: the oldest that has sent part of a Request and
// stopped (an honest initiator sends its Request in one write, a single
// segment), else the oldest that has sent nothing yet, else the oldest.
// One whose whole Request is in its socket, waiting only for its handshake
// goroutine to be scheduled (a busy host under a flood), is not slow, and
// evicting it would turn away an honest peer.
func slowest(l *list.List) *halfOpen {
	var silent *halfOpen
	e := l.Front()
	for i := 0; e != nil && i < evictScan; e, i = e.Next(), i+1 {
		h := e.Value.(*halfOpen)
		switch n, whole := requestArrived(h.raw); {
		case whole:
		case n > 0:
			return h
		case silent == nil:
			silent = h
		}
	}
	if silent != nil {
		return silent
	}
	return l.Front().Value.(*halfOpen)
}

// evictLocked takes h out of the half-open set.
func (lis *listener) evictLocked(h *halfOpen) {
	h.gone = true
	lis.half.Remove(h.all)
	same := lis.bySrc[h.src]
	same.Remove(h.same)
	if same.Len() == 0 {
		delete(lis.bySrc, h.src)
	}
}

// leave takes h out of the half-open set for its handshake goroutine,
// which then owns the connection; false when eviction or Close took it
// (and closed the socket) first.
func (lis *listener) leave(h *halfOpen) bool {
	lis.mu.Lock()
	defer lis.mu.Unlock()
	if h.gone {
		return false
	}
	lis.evictLocked(h)
	return true
}

// sourceOf is the source a per-source limit counts: the IP address, or
// its /64 for IPv6 (what one host is usually given).
func sourceOf(a net.Addr) netip.Addr {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip := ta.AddrPort().Addr().Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return ip
}

// handshake reads a connection's MPA Request by h.deadline and queues it,
// or refuses it: a Reject Reply where the peer speaks MPA (it asked for
// markers, a revision we lack, an RTR we cannot serve), a plain close
// otherwise. Each connection has its own goroutine, so a slow peer delays
// only itself.
func (lis *listener) handshake(h *halfOpen) {
	c := h.raw
	l := lis.link
	remote := c.RemoteAddr().String()
	tuneSocket(c, userTimeout)
	if l.cfg.wrap != nil {
		c = l.cfg.wrap(c)
	}
	c.SetDeadline(h.deadline)
	f, err := readFrame(&deliveredBy{Conn: c})
	var o offer
	if err == nil {
		o, err = parseOffer(f)
	}
	if err == nil {
		err = checkRequest(f, &o)
	}
	if !lis.leave(h) {
		c.Close() // evicted or the listener closed: the socket is closed and reported
		return
	}
	// This goroutine owns c from here until push.
	if err != nil {
		if f != nil || errors.Is(err, errMPA) || errors.Is(err, iw.ErrMPABadRev) {
			// The peer speaks MPA: tell it no (a revision-3 initiator
			// learns we speak 2, RFC 6581).
			c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			c.Write(rejectFrame(&o, nil))
		}
		c.Close()
		l.refused(remote, handshakeError("MPA Request", remote, err))
		return
	}
	c.SetDeadline(time.Time{})
	r := &connReq{lis: lis, conn: c, off: o, remote: remote}
	if lis.waiting.Add(1) > maxQueued { // claim undoes the count
		r.refuse(fmt.Errorf("%w: %d requests already wait for Accept", provider.ErrLimit, maxQueued))
		return
	}
	r.timer.Store(time.AfterFunc(l.cfg.mpaTimeout, r.expire))
	if !lis.push(r) {
		r.refuse(nil)
	}
}

// Request states: pending until Accept, Reject, expiry or the listener's
// Close claims it.
const (
	reqPending int32 = iota
	reqClaimed
)

// connReq is an MPA Request waiting for an answer.
type connReq struct {
	lis    *listener
	conn   net.Conn
	off    offer
	remote string
	state  atomic.Int32
	timer  atomic.Pointer[time.Timer] // set after the timer starts: expire may run first
}

// claim takes the request (and its connection) for the caller; false when
// another claimed it first.
func (r *connReq) claim() bool {
	if !r.state.CompareAndSwap(reqPending, reqClaimed) {
		return false
	}
	r.lis.waiting.Add(-1)
	if t := r.timer.Load(); t != nil {
		t.Stop()
	}
	return true
}

func (r *connReq) PrivateData() []byte { return r.off.ulp }

// Param is the initiator's offer: its IRD and ORD from the RFC 6581 block
// (zero when it sent none), and its private data.
func (r *connReq) Param() provider.ConnParam {
	return provider.ConnParam{
		PrivateData:        r.off.ulp,
		ResponderResources: uint8(min(r.off.ird, 255)),
		InitiatorDepth:     uint8(min(r.off.ord, 255)),
	}
}

// Reject refuses the request with an MPA Reply carrying R and
// privateData.
func (r *connReq) Reject(privateData []byte) error {
	if err := r.lis.link.checkPrivateData(privateData); err != nil {
		return err
	}
	if !r.claim() {
		return fmt.Errorf("%w: the request was already answered or expired", provider.ErrInvalidState)
	}
	r.conn.SetWriteDeadline(time.Now().Add(r.lis.link.cfg.mpaTimeout))
	_, err := r.conn.Write(rejectFrame(&r.off, privateData))
	r.close()
	if err != nil {
		return handshakeError("MPA Reject", r.remote, err)
	}
	return nil
}

// expire refuses a request nobody answered within the MPA timeout.
func (r *connReq) expire() {
	r.refuse(fmt.Errorf("%w: no Accept or Reject within %v", provider.ErrTimeout, r.lis.link.cfg.mpaTimeout))
}

// refuse rejects the request if it is still pending.
func (r *connReq) refuse(why error) {
	if !r.claim() {
		return
	}
	r.conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	r.conn.Write(rejectFrame(&r.off, nil))
	r.close()
	if why != nil {
		r.lis.link.refused(r.remote, why)
	}
}

// close ends the connection after the Reject Reply: FIN first, so the
// initiator reads the Reply before the connection goes.
func (r *connReq) close() {
	if cw, ok := r.conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	r.conn.Close()
}
