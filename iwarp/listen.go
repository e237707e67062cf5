package iwarp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// maxPending bounds the connections a listener holds before an application
// answers them (MPA exchanges in progress plus requests waiting for
// Accept): beyond it new connections are closed at once, so a flood of
// clients costs bounded memory and descriptors.
const maxPending = 256

// listener accepts TCP connections, reads their MPA Requests (each within
// the MPA timeout) and queues them for Accept.
type listener struct {
	link    *link
	ln      net.Listener
	avail   chan struct{} // a request was queued (capacity 1)
	done    chan struct{}
	once    sync.Once
	pending atomic.Int32

	mu    sync.Mutex            // guards shake and queue
	shake map[net.Conn]struct{} // connections whose MPA Request is being read
	queue []*connReq            // requests waiting for Accept; claimed ones are skipped
}

func (l *link) Listen(d *soft.Device, addr string) (provider.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("%w: listen on %s: %w", provider.ErrBusy, addr, err)
		}
		return nil, fmt.Errorf("%w: listen on %s: %w", provider.ErrInvalidArgument, addr, err)
	}
	lis := &listener{link: l, ln: ln, avail: make(chan struct{}, 1), done: make(chan struct{}),
		shake: make(map[net.Conn]struct{})}
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

// Close stops listening and refuses the requests nobody answered.
func (lis *listener) Close() error {
	err := error(provider.ErrClosed)
	lis.once.Do(func() {
		err = nil
		close(lis.done)
		lis.ln.Close()
		lis.link.trackListener(lis, false)
		lis.mu.Lock()
		for c := range lis.shake {
			c.Close() // its handshake goroutine fails and ends
		}
		clear(lis.shake)
		queued := lis.queue
		lis.queue = nil
		lis.mu.Unlock()
		for _, r := range queued {
			r.refuse(nil)
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
		if lis.pending.Add(1) > maxPending {
			lis.pending.Add(-1)
			c.Close()
			lis.link.refused(c.RemoteAddr().String(), errors.New("iwarp: too many connections waiting for an answer"))
			continue
		}
		if !lis.shaking(c, true) {
			lis.pending.Add(-1)
			c.Close()
			return
		}
		go lis.handshake(c)
	}
}

// shaking adds or removes a connection in handshake; adding fails once the
// listener is closed, removing once Close took (and closed) it.
func (lis *listener) shaking(c net.Conn, add bool) bool {
	lis.mu.Lock()
	defer lis.mu.Unlock()
	if !add {
		_, ok := lis.shake[c]
		delete(lis.shake, c)
		return ok
	}
	select {
	case <-lis.done:
		return false
	default:
	}
	lis.shake[c] = struct{}{}
	return true
}

// handshake reads a connection's MPA Request within the MPA timeout and
// queues it, or refuses it: a Reject Reply where the peer speaks MPA (it
// asked for markers, a revision we lack, an RTR we cannot serve), a plain
// close otherwise.
//
// The connection is the listener's (Close may close it) only while it is
// in lis.shake; this goroutine takes it out before it hands the request
// to Accept, after which the request, and then the QP, owns it.
func (lis *listener) handshake(raw net.Conn) {
	c := raw
	l := lis.link
	remote := c.RemoteAddr().String()
	tuneSocket(c, userTimeout)
	if l.cfg.wrap != nil {
		c = l.cfg.wrap(c)
	}
	c.SetDeadline(time.Now().Add(l.cfg.mpaTimeout))
	f, err := readFrame(c)
	var o offer
	if err == nil {
		o, err = parseOffer(f)
	}
	if err == nil {
		err = checkRequest(f, &o)
	}
	if !lis.shaking(raw, false) {
		c.Close() // the listener closed it
		lis.pending.Add(-1)
		return
	}
	if err != nil {
		if f != nil || errors.Is(err, errMPA) || errors.Is(err, iw.ErrMPABadRev) {
			// The peer speaks MPA: tell it no (a revision-3 initiator
			// learns we speak 2, RFC 6581).
			c.Write(rejectFrame(&o, nil))
		}
		lis.drop(c, handshakeError("MPA Request", remote, err))
		return
	}
	c.SetDeadline(time.Time{})
	r := &connReq{lis: lis, conn: c, off: o, remote: remote}
	r.timer.Store(time.AfterFunc(l.cfg.mpaTimeout, r.expire))
	if !lis.push(r) {
		r.refuse(nil)
	}
}

// drop closes a connection the listener refused and reports why.
func (lis *listener) drop(c net.Conn, err error) {
	c.Close()
	lis.pending.Add(-1)
	lis.link.refused(c.RemoteAddr().String(), err)
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

func (r *connReq) claim() bool {
	if !r.state.CompareAndSwap(reqPending, reqClaimed) {
		return false
	}
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
	r.lis.pending.Add(-1)
}
