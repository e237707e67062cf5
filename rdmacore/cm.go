//go:build cgo && rdmacore

package rdmacore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/provider"
)

// cmEvent is an rdma_cm_event copied out of librdmacm (and acknowledged).
type cmEvent struct {
	typ                 uint32
	status              int32
	id, listen          uint64
	qpn                 uint32
	pdata               []byte
	rr, ini, retry, rnr uint8
}

// idQueue holds the events of one rdma_cm_id until its owner reads them.
type idQueue struct {
	mu    sync.Mutex
	evs   []cmEvent
	ready chan struct{} // signalled when evs grows
}

func newIDQueue() *idQueue { return &idQueue{ready: make(chan struct{}, 1)} }

func (q *idQueue) push(e cmEvent) {
	q.mu.Lock()
	q.evs = append(q.evs, e)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *idQueue) next(ctx context.Context) (cmEvent, error) {
	for {
		q.mu.Lock()
		if len(q.evs) > 0 {
			e := q.evs[0]
			q.evs = q.evs[1:]
			q.mu.Unlock()
			return e, nil
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return cmEvent{}, fmt.Errorf("%w: %w", provider.ErrTimeout, ctx.Err())
			}
			return cmEvent{}, ctx.Err()
		}
	}
}

// cmChannel is a device's rdma_cm event channel. One goroutine reads it
// through the netpoller and routes each event to its id's queue; mu guards
// the maps.
type cmChannel struct {
	d  *device
	ch unsafe.Pointer
	f  *os.File
	wg sync.WaitGroup
	// dying counts the ids of abandoned dials still being destroyed (see
	// destroyLater); the channel outlives them.
	dying sync.WaitGroup

	mu    sync.Mutex
	qs    map[uint64]*idQueue
	conns map[uint64]*qp // established connections, for DISCONNECTED
}

func newCMChannel(d *device) (*cmChannel, error) {
	ch, fd, err := createEventChannel()
	if err != nil {
		return nil, wrap("rdma_create_event_channel", err)
	}
	f, err := dupFile(fd, "rdma_cm channel")
	if err != nil {
		destroyEventChannel(ch)
		return nil, err
	}
	c := &cmChannel{d: d, ch: ch, f: f, qs: map[uint64]*idQueue{}, conns: map[uint64]*qp{}}
	c.wg.Add(1)
	go c.run()
	return c, nil
}

func (c *cmChannel) run() {
	defer c.wg.Done()
	rc, err := c.f.SyscallConn()
	if err != nil {
		return
	}
	ev := cAlloc[cCMEv](1)
	defer cFree(ev)
	for {
		// Each event is routed as it is read: Read returns only when
		// the callback says it is done, and it never is.
		err := rc.Read(func(uintptr) bool {
			for {
				if e := getCMEvent(c.ch, ev); e != nil {
					return !errors.Is(e, syscall.EAGAIN)
				}
				c.route(cmEvent{typ: uint32(ev.event), status: int32(ev.status),
					id: uint64(ev.id), listen: uint64(ev.listen_id), qpn: uint32(ev.qp_num),
					pdata: C2Bytes(ev), rr: uint8(ev.responder_resources), ini: uint8(ev.initiator_depth),
					retry: uint8(ev.retry_count), rnr: uint8(ev.rnr_retry_count)})
			}
		})
		if err != nil {
			return
		}
	}
}

func (c *cmChannel) route(e cmEvent) {
	c.mu.Lock()
	if e.typ == cmConnectRequest {
		lq := c.qs[e.listen]
		if lq == nil {
			c.mu.Unlock()
			go func() { rejectID(e.id, nil); destroyID(e.id) }()
			return
		}
		c.qs[e.id] = newIDQueue()
		c.mu.Unlock()
		lq.push(e)
		return
	}
	if e.typ == cmDisconnected || e.typ == cmDeviceRemoval {
		if q := c.conns[e.id]; q != nil {
			c.mu.Unlock()
			q.peerGone()
			return
		}
	}
	q := c.qs[e.id]
	c.mu.Unlock()
	if q != nil {
		q.push(e)
	}
}

func (c *cmChannel) register(id uint64) *idQueue {
	q := newIDQueue()
	c.mu.Lock()
	c.qs[id] = q
	c.mu.Unlock()
	return q
}

func (c *cmChannel) queue(id uint64) *idQueue {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.qs[id]
}

func (c *cmChannel) forget(id uint64) {
	c.mu.Lock()
	delete(c.qs, id)
	delete(c.conns, id)
	c.mu.Unlock()
}

// destroyLater destroys the id of a dial its context abandoned, off the
// caller's goroutine. rdma_destroy_id of an iWARP id whose MPA request is
// unanswered blocks until siw's MPA timer fires (MPAREQ_TIMEOUT, 10 s,
// drivers/infiniband/sw/siw/siw_cm.h; the cm_id reference siw_connect
// took is dropped only then), so a Dial that honours its context cannot
// wait for it. The reader keeps acknowledging the id's last events
// meanwhile, which rdma_destroy_id waits for.
func (c *cmChannel) destroyLater(id uint64) {
	c.dying.Add(1)
	go func() {
		defer c.dying.Done()
		destroyID(id)
	}()
}

func (c *cmChannel) close() {
	c.dying.Wait()
	c.f.Close()
	c.wg.Wait()
	c.mu.Lock()
	ids := make([]uint64, 0, len(c.qs))
	for id := range c.qs {
		ids = append(ids, id)
	}
	c.qs = map[uint64]*idQueue{}
	c.mu.Unlock()
	for _, id := range ids {
		destroyID(id)
	}
	destroyEventChannel(c.ch)
}

// peerGone is a DISCONNECTED event of the QP's connection: the QP moves to
// ERR (the CM does that only for QPs it created) and Events says so.
func (q *qp) peerGone() {
	q.mu.Lock()
	if !q.closed {
		q.toErrLocked()
	}
	q.mu.Unlock()
	q.d.deliver(provider.AsyncEvent{Type: provider.EventPeerDisconnected, QPN: q.qpn, Err: provider.ErrDisconnected})
}

// parseIPv4 parses "ip:port" (port may be 0) into host-order numbers.
func parseIPv4(addr string) (uint32, uint16, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: address %q: %v", provider.ErrInvalidArgument, addr, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: port of %q", provider.ErrInvalidArgument, addr)
	}
	if host == "" {
		return 0, uint16(p), nil
	}
	ip := net.ParseIP(host).To4()
	if ip == nil {
		return 0, 0, fmt.Errorf("%w: %q is not an IPv4 address", provider.ErrInvalidArgument, host)
	}
	return uint32(ip[0])<<24 | uint32(ip[1])<<16 | uint32(ip[2])<<8 | uint32(ip[3]), uint16(p), nil
}

func ipString(ip uint32, port uint16) string {
	return net.JoinHostPort(net.IPv4(byte(ip>>24), byte(ip>>16), byte(ip>>8), byte(ip)).String(), strconv.Itoa(int(port)))
}

// listener is a listening rdma_cm_id bound to one of the device's
// addresses.
type listener struct {
	d    *device
	id   uint64
	q    *idQueue
	addr string
	once sync.Once
}

// Listen binds addr ("ip:port"; an empty host is the device's first
// address, port 0 picks one) and listens on it.
func (d *device) Listen(addr string) (provider.Listener, error) {
	ip, port, err := parseIPv4(addr)
	if err != nil {
		return nil, err
	}
	if ip == 0 {
		if len(d.addrs) == 0 {
			return nil, fmt.Errorf("%w: %s has no IPv4 address to listen on", provider.ErrInvalidArgument, d.name)
		}
		ip, _, _ = parseIPv4(d.addrs[0] + ":0")
	}
	if d.isClosed() {
		return nil, provider.ErrClosed
	}
	id, err := createID(d.cm.ch)
	if err != nil {
		return nil, wrap("rdma_create_id", err)
	}
	q := d.cm.register(id)
	if err := bindListen(id, ip, port, 64); err != nil {
		d.cm.forget(id)
		destroyID(id)
		return nil, wrap("rdma_bind_addr/rdma_listen "+addr, err)
	}
	if dev := idDevice(id); dev != d.name {
		d.cm.forget(id)
		destroyID(id)
		return nil, fmt.Errorf("%w: %s belongs to device %q, not %s", provider.ErrInvalidArgument, addr, dev, d.name)
	}
	lip, lport, _, _ := idAddrs(id)
	l := &listener{d: d, id: id, q: q, addr: ipString(lip, lport)}
	d.mu.Lock()
	d.lns[l] = struct{}{}
	d.mu.Unlock()
	return l, nil
}

func (l *listener) Addr() string { return l.addr }

func (l *listener) Accept(ctx context.Context) (provider.ConnRequest, error) {
	e, err := l.q.next(ctx)
	if err != nil {
		return nil, err
	}
	if e.typ != cmConnectRequest {
		return nil, fmt.Errorf("%w: listener got rdma_cm event %d", provider.ErrProtocol, e.typ)
	}
	return &connReq{d: l.d, e: e}, nil
}

func (l *listener) Close() error {
	var err error = provider.ErrClosed
	l.once.Do(func() {
		l.d.cm.forget(l.id)
		err = destroyID(l.id)
		// Requests that were never accepted are refused.
		l.q.mu.Lock()
		evs := l.q.evs
		l.q.evs = nil
		l.q.mu.Unlock()
		for _, e := range evs {
			if e.typ == cmConnectRequest {
				rejectID(e.id, nil)
				l.d.cm.forget(e.id)
				destroyID(e.id)
			}
		}
		l.d.mu.Lock()
		delete(l.d.lns, l)
		l.d.mu.Unlock()
	})
	return err
}

// connReq is a CONNECT_REQUEST: its id is new and is answered once.
type connReq struct {
	d    *device
	e    cmEvent
	once sync.Once
}

func (r *connReq) PrivateData() []byte { return r.e.pdata }

func (r *connReq) Param() provider.ConnParam {
	// The CMs (ib_cm, iw_cm) turn the initiator's IRD/ORD into the
	// receiver's view: rr is the initiator's ORD, ini its IRD.
	return provider.ConnParam{PrivateData: r.e.pdata, ResponderResources: r.e.ini, InitiatorDepth: r.e.rr,
		RetryCount: r.e.retry, RNRRetryCount: r.e.rnr}
}

func (r *connReq) Reject(pdata []byte) error {
	if len(pdata) > r.d.caps.MaxPrivateData {
		return fmt.Errorf("%w: %d bytes of private data (at most %d)", provider.ErrInvalidArgument, len(pdata), r.d.caps.MaxPrivateData)
	}
	var err error = provider.ErrInvalidState
	r.once.Do(func() {
		err = rejectID(r.e.id, pdata)
		r.d.cm.forget(r.e.id)
		destroyID(r.e.id)
		if err != nil {
			err = wrap("rdma_reject", err)
		}
	})
	return err
}

// defaultAccess is what a QP dialled or accepted from RESET grants its
// peer: every remote right the device has.
func (d *device) defaultAccess() int {
	f := ibvAccRemoteWrite | ibvAccRemoteRead
	if d.caps.AtomicScope != provider.AtomicNone {
		f |= ibvAccRemoteAtom
	}
	return f
}

// toInit moves a QP in RESET to INIT with the CM's port and P_Key; a QP
// the caller moved to INIT keeps its access flags.
func (q *qp) toInit(id uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch q.state {
	case provider.StateInit:
		return nil
	case provider.StateReset:
	default:
		return fmt.Errorf("%w: connecting a QP in %v (RESET or INIT)", provider.ErrInvalidState, q.state)
	}
	if err := cmModify(id, q.h, ibvQPSInit, -1, -1, q.d.defaultAccess()); err != nil {
		return wrap("rdma_init_qp_attr/ibv_modify_qp -> INIT", err)
	}
	q.state = provider.StateInit
	return nil
}

// toRTS moves the QP to RTR and RTS with the CM's path and our IRD/ORD
// (RoCE and InfiniBand: the CM leaves a QP it did not create to us).
func (q *qp) toRTS(id uint64, ird, ord uint8) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := cmModify(id, q.h, ibvQPSRTR, int(ird), -1, -1); err != nil {
		return wrap("ibv_modify_qp -> RTR", err)
	}
	q.state = provider.StateRTR
	if err := cmModify(id, q.h, ibvQPSRTS, -1, int(ord), -1); err != nil {
		return wrap("ibv_modify_qp -> RTS", err)
	}
	q.state = provider.StateRTS
	return nil
}

// connected records the established connection on the QP.
func (q *qp) connected(id uint64) {
	q.mu.Lock()
	q.id = id
	if q.state != provider.StateErr {
		q.state = provider.StateRTS
	}
	q.mu.Unlock()
	q.d.cm.mu.Lock()
	q.d.cm.conns[id] = q
	q.d.cm.mu.Unlock()
}

// cmTimeout is the default bound of a Dial or Accept whose context has no
// deadline.
const cmTimeout = 30 * time.Second

func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, cmTimeout)
}

func (r *connReq) Accept(ctx context.Context, pq provider.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	q, ok := pq.(*qp)
	if !ok || q.d != r.d {
		return provider.ConnInfo{}, fmt.Errorf("%w: QP of another device", provider.ErrInvalidArgument)
	}
	if len(param.PrivateData) > r.d.caps.MaxPrivateData {
		return provider.ConnInfo{}, fmt.Errorf("%w: %d bytes of private data (at most %d)", provider.ErrInvalidArgument, len(param.PrivateData), r.d.caps.MaxPrivateData)
	}
	var info provider.ConnInfo
	var err error = provider.ErrInvalidState
	r.once.Do(func() {
		info, err = r.accept(ctx, q, param)
		if err != nil {
			rejectID(r.e.id, nil)
			r.d.cm.forget(r.e.id)
			destroyID(r.e.id)
		}
	})
	return info, err
}

func (r *connReq) accept(ctx context.Context, q *qp, param provider.ConnParam) (provider.ConnInfo, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	id := r.e.id
	p := param.WithDefaults(r.d.caps)
	ird, ord := min(p.ResponderResources, r.e.rr), min(p.InitiatorDepth, r.e.ini)
	if err := q.toInit(id); err != nil {
		return provider.ConnInfo{}, err
	}
	if !r.d.iwarp {
		if err := q.toRTS(id, ird, ord); err != nil {
			return provider.ConnInfo{}, err
		}
	}
	cp := cmParam{pdata: param.PrivateData, rr: ird, ini: ord, retry: p.RetryCount, rnr: p.RNRRetryCount, qpn: q.qpn}
	if err := acceptID(id, &cp); err != nil {
		return provider.ConnInfo{}, wrap("rdma_accept", err)
	}
	cq := r.d.cm.queue(id)
	if cq == nil {
		return provider.ConnInfo{}, provider.ErrClosed
	}
	for {
		e, err := cq.next(ctx)
		if err != nil {
			return provider.ConnInfo{}, err
		}
		switch e.typ {
		case cmEstablished:
			q.connected(id)
			lip, lport, rip, rport := idAddrs(id)
			return provider.ConnInfo{LocalAddr: ipString(lip, lport), RemoteAddr: ipString(rip, rport),
				RemoteQPN: r.e.qpn, IRD: ird, ORD: ord}, nil
		case cmConnectError, cmUnreachable, cmRejected, cmDisconnected:
			return provider.ConnInfo{}, fmt.Errorf("%w: rdma_cm event %d (status %d) while accepting", provider.ErrDisconnected, e.typ, e.status)
		}
	}
}

func (d *device) Dial(ctx context.Context, addr string, pq provider.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	q, ok := pq.(*qp)
	if !ok || q.d != d {
		return provider.ConnInfo{}, fmt.Errorf("%w: QP of another device", provider.ErrInvalidArgument)
	}
	if len(param.PrivateData) > d.caps.MaxPrivateData {
		return provider.ConnInfo{}, fmt.Errorf("%w: %d bytes of private data (%s carries at most %d)", provider.ErrInvalidArgument, len(param.PrivateData), d.caps.Transport, d.caps.MaxPrivateData)
	}
	ip, port, err := parseIPv4(addr)
	if err != nil {
		return provider.ConnInfo{}, err
	}
	if ip == 0 || port == 0 {
		return provider.ConnInfo{}, fmt.Errorf("%w: dial needs ip:port, not %q", provider.ErrInvalidArgument, addr)
	}
	q.mu.Lock()
	st := q.state
	q.mu.Unlock()
	if st != provider.StateReset && st != provider.StateInit {
		return provider.ConnInfo{}, fmt.Errorf("%w: dialling with a QP in %v (RESET or INIT)", provider.ErrInvalidState, st)
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	id, err := createID(d.cm.ch)
	if err != nil {
		return provider.ConnInfo{}, wrap("rdma_create_id", err)
	}
	cq := d.cm.register(id)
	info, err := d.dial(ctx, id, cq, ip, port, q, param)
	if err != nil {
		d.cm.forget(id)
		if ctx.Err() != nil {
			d.cm.destroyLater(id)
		} else {
			destroyID(id)
		}
		return provider.ConnInfo{}, err
	}
	return info, nil
}

// expect waits for the event want on the id's queue.
func expect(ctx context.Context, cq *idQueue, want uint32, what string) (cmEvent, error) {
	e, err := cq.next(ctx)
	if err != nil {
		return e, err
	}
	if e.typ != want {
		return e, fmt.Errorf("%w: %s failed (rdma_cm event %d, status %d)", provider.ErrTimeout, what, e.typ, e.status)
	}
	return e, nil
}

func (d *device) dial(ctx context.Context, id uint64, cq *idQueue, ip uint32, port uint16, q *qp, param provider.ConnParam) (provider.ConnInfo, error) {
	var src uint32
	if len(d.addrs) > 0 {
		src, _, _ = parseIPv4(d.addrs[0] + ":0")
	}
	if err := resolveAddr(id, src, ip, port, 2000); err != nil {
		return provider.ConnInfo{}, wrap("rdma_resolve_addr", err)
	}
	if _, err := expect(ctx, cq, cmAddrResolved, "address resolution"); err != nil {
		return provider.ConnInfo{}, err
	}
	if dev := idDevice(id); dev != d.name {
		return provider.ConnInfo{}, fmt.Errorf("%w: %s is reached through device %q, not %s", provider.ErrInvalidArgument, ipString(ip, port), dev, d.name)
	}
	if err := resolveRoute(id, 2000); err != nil {
		return provider.ConnInfo{}, wrap("rdma_resolve_route", err)
	}
	if _, err := expect(ctx, cq, cmRouteResolved, "route resolution"); err != nil {
		return provider.ConnInfo{}, err
	}
	if err := q.toInit(id); err != nil {
		return provider.ConnInfo{}, err
	}
	p := param.WithDefaults(d.caps)
	cp := cmParam{pdata: param.PrivateData, rr: p.ResponderResources, ini: p.InitiatorDepth, retry: p.RetryCount, rnr: p.RNRRetryCount, qpn: q.qpn}
	if err := connectID(id, &cp); err != nil {
		return provider.ConnInfo{}, wrap("rdma_connect", err)
	}
	for {
		e, err := cq.next(ctx)
		if err != nil {
			return provider.ConnInfo{}, err
		}
		// ib_cm turns the REP's fields into our view of the peer: ini is
		// the acceptor's IRD (cm_format_rep_event). iw_cm reports the
		// values siw negotiated and set on our QP instead: ini our IRD,
		// rr our ORD (siw_cm.c siw_proc_mpareply and siw_cm_upcall;
		// cma.c cma_iw_handler).
		ird, ord := p.ResponderResources, min(p.InitiatorDepth, e.ini)
		if d.iwarp {
			ird, ord = e.ini, e.rr
		}
		switch e.typ {
		case cmConnectResponse:
			if err := q.toRTS(id, ird, ord); err != nil {
				rejectID(id, nil)
				return provider.ConnInfo{}, err
			}
			if err := establishID(id); err != nil {
				return provider.ConnInfo{}, wrap("rdma_establish", err)
			}
			fallthrough
		case cmEstablished:
			q.connected(id)
			lip, lport, rip, rport := idAddrs(id)
			return provider.ConnInfo{PrivateData: e.pdata, LocalAddr: ipString(lip, lport), RemoteAddr: ipString(rip, rport),
				RemoteQPN: e.qpn, IRD: ird, ORD: ord}, nil
		case cmRejected:
			return provider.ConnInfo{}, &provider.RejectError{PrivateData: e.pdata, Reason: fmt.Sprintf("rdma_cm reject status %d", e.status)}
		case cmUnreachable, cmConnectError:
			return provider.ConnInfo{}, fmt.Errorf("%w: peer unreachable (rdma_cm event %d, status %d)", provider.ErrTimeout, e.typ, e.status)
		}
	}
}
