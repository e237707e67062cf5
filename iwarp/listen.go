package iwarp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// maxQueued bounds the requests a listener holds for the application
// (MPA Request read, no Accept or Reject yet): its cmkit backlog. Beyond
// it a new request is refused with a Reject Reply. Each waits at most
// MPATimeout, and only a peer that sent a well-formed Request gets here.
const maxQueued = 256

// listener accepts TCP connections, reads their MPA Requests and queues
// them for Accept. What is MPA's is here: the Request's framing and
// checks, the Reject Reply, the eviction reports; the rules every
// transport shares (the backlog, the half-open set and its eviction, the
// accept loop, Close) are cmkit's (Sockets).
//
// Ownership of a connection, which decides who may close it:
//   - The accept loop takes it from the kernel and admits it to the
//     half-open set before its handshake goroutine starts.
//   - While it is in the half-open set its handshake goroutine reads the
//     MPA Request from it, but whoever takes it out of the set owns it: the
//     handshake goroutine itself (Leave) when the Request is read or has
//     failed, or the accept loop evicting it (the set is full) or Close,
//     which then close the socket to stop the read, and the handshake
//     goroutine only cleans up its wrapper.
//   - From Leave to the queue (or a refusal) the handshake goroutine owns
//     it.
//   - Once queued, the connReq owns it; whoever claims the request
//     (Accept, Reject, expiry, Close refusing it) owns it, and after
//     Accept's QP.Establish the QP's endpoint does. The listener never
//     touches a claimed request's connection again.
type listener struct {
	*cmkit.Sockets[*connReq] // Addr, Close
	link                     *link
}

func (l *link) Listen(d *soft.Device, addr string) (provider.Listener, error) {
	ln, err := (&net.ListenConfig{KeepAliveConfig: keepAlive}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("%w: listen on %s: %w", provider.ErrBusy, addr, err)
		}
		return nil, fmt.Errorf("%w: listen on %s: %w", provider.ErrInvalidArgument, addr, err)
	}
	lis := &listener{link: l}
	refuse := func(r *connReq) { r.refuse(nil) } // a no-op for a request already claimed
	lis.Sockets = cmkit.NewSockets(ln, cmkit.NewQueue(maxQueued, (*connReq).Pending),
		cmkit.HalfOpenLimits{Max: l.cfg.maxHalfOpen, PerSource: l.cfg.maxHalfOpenPerSource, PressureAt: l.cfg.maxHalfOpen / 2},
		cmkit.SocketHooks[*connReq]{
			Source:    func(c net.Conn) netip.Addr { return sourceOf(c.RemoteAddr()) },
			Pace:      paceOf,
			Handshake: lis.handshake,
			Evicted:   lis.evicted,
			Refuse:    refuse,
			Stopped: func(err error) error {
				return fmt.Errorf("%w: iwarp listener %s stopped: %w", provider.ErrClosed, ln.Addr(), err)
			},
			Release: func() { l.listeners.Remove(lis) },
		})
	if !l.listeners.Add(lis) {
		ln.Close()
		return nil, provider.ErrClosed
	}
	lis.Start()
	return lis, nil
}

func (lis *listener) Accept(ctx context.Context) (provider.ConnRequest, error) {
	return cmkit.AcceptConn(ctx, lis.Queue())
}

// evicted reports a connection the half-open set evicted for a newcomer
// from src.
func (lis *listener) evicted(c net.Conn, src netip.Addr, perSource bool) {
	cfg := &lis.link.cfg
	why := fmt.Errorf("%w: evicted: %d connections in their MPA exchange, the oldest goes", provider.ErrLimit, cfg.maxHalfOpen)
	if perSource {
		why = fmt.Errorf("%w: evicted: %d connections from %v in their MPA exchange, the oldest goes",
			provider.ErrLimit, cfg.maxHalfOpenPerSource, src)
	}
	lis.link.refused(c.RemoteAddr().String(), why)
}

// paceOf tells the half-open set how far a connection got with its MPA
// Request: an honest initiator sends it in one write, a single segment.
func paceOf(c net.Conn) cmkit.Pace {
	switch n, whole := requestArrived(c); {
	case whole:
		return cmkit.Arrived
	case n > 0:
		return cmkit.Stalled
	}
	return cmkit.Silent
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

// handshake reads a connection's MPA Request by its deadline (the
// Request timeout from its admission) and queues it, or refuses it: a
// Reject Reply where the peer speaks MPA (it asked for markers, a
// revision we lack, an RTR we cannot serve), a plain close otherwise. Each connection has its own goroutine, so a slow peer delays
// only itself.
func (lis *listener) handshake(h *cmkit.Handshake[net.Conn]) {
	c := h.Conn
	l := lis.link
	remote := c.RemoteAddr().String()
	tuneSocket(c, userTimeout)
	c = l.wrap(c)
	c.SetDeadline(h.Admitted.Add(min(l.cfg.requestTimeout, l.cfg.mpaTimeout))) // the whole Request is due by then
	f, err := readFrame(&deliveredBy{Conn: c})
	var o offer
	if err == nil {
		o, err = parseOffer(f)
	}
	if err == nil {
		err = checkRequest(f, &o)
	}
	if !lis.Leave(h) {
		c.Close() // evicted or the listener closed: the socket is closed and reported
		return
	}
	// This goroutine owns c from here until it is queued.
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
	q := lis.Queue()
	if !q.Reserve() {
		var why error // the listener closed
		if !q.Closed() {
			why = fmt.Errorf("%w: %d requests already wait for Accept", provider.ErrLimit, maxQueued)
		}
		r.refuse(why)
		return
	}
	r.watch = cmkit.WatchDialer(c, &r.Claim, r.dialerGone)
	r.timer.Store(time.AfterFunc(l.cfg.mpaTimeout, r.expire))
	if !q.Push(r) {
		r.refuse(nil)
	}
}

// connReq is an MPA Request waiting for an answer. Its Claim is pending
// until Accept, Reject, expiry, the initiator's give-up (seen by its
// watch) or the listener's Close takes it.
type connReq struct {
	cmkit.Claim
	lis    *listener
	conn   net.Conn
	off    offer
	remote string
	watch  *cmkit.Watch               // reads conn while the request waits; set before it is queued
	timer  atomic.Pointer[time.Timer] // set after the timer starts: expire may run first
}

// claim takes the request (and its connection) for the caller, stopping
// the expiry timer and the watch. It fails with cmkit.ErrAnswered when
// another claimed it first (an answer, expiry, Close), and with
// cmkit.ErrDialerGone or ErrDialerSpoke when the initiator left or sent
// data before the Reply (the connection is closed then).
func (r *connReq) claim() error {
	claimed, err := r.watch.Claim(&r.Claim)
	if !claimed {
		return err
	}
	r.stopTimer()
	if err != nil {
		r.close()
	}
	return err
}

func (r *connReq) stopTimer() {
	if t := r.timer.Load(); t != nil {
		t.Stop()
	}
}

// dialerGone ends a request whose initiator left while it waited (its
// watch claimed it).
func (r *connReq) dialerGone() {
	r.stopTimer()
	r.close()
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
	if err := r.claim(); err != nil {
		return r.claimError(err)
	}
	r.conn.SetWriteDeadline(time.Now().Add(r.lis.link.cfg.mpaTimeout))
	_, err := r.conn.Write(rejectFrame(&r.off, privateData))
	r.close()
	if err != nil {
		return handshakeError("MPA Reject", r.remote, err)
	}
	return nil
}

// claimError is the error of an Accept or Reject that could not claim the
// request.
func (r *connReq) claimError(err error) error {
	if err == cmkit.ErrAnswered {
		return fmt.Errorf("%w: the request was already answered or expired", provider.ErrInvalidState)
	}
	return fmt.Errorf("iwarp: request from %s: %w", r.remote, err)
}

// expire refuses a request nobody answered within the MPA timeout.
func (r *connReq) expire() {
	r.refuse(fmt.Errorf("%w: no Accept or Reject within %v", provider.ErrTimeout, r.lis.link.cfg.mpaTimeout))
}

// refuse rejects the request if it is still pending.
func (r *connReq) refuse(why error) {
	if r.claim() != nil {
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
