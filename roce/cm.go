package roce

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// cmConn is the side channel of one connection. Writes are serialized by
// mu; after establishment a monitor goroutine reads it and fails the QP
// when the peer disconnects or the channel ends.
type cmConn struct {
	l    *link
	nc   net.Conn
	mu   sync.Mutex
	done bool     // closed by this side: the monitor fails no QP
	qp   *soft.QP // set once established
	// ep is the endpoint attached for the connection, set by establish
	// before the monitor starts; the monitor hands it the DREQ's
	// expected PSN.
	ep   *qpConn
	stop chan struct{}
}

func newCMConn(l *link, nc net.Conn) *cmConn {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	return &cmConn{l: l, nc: nc, stop: make(chan struct{})}
}

// send writes one message.
func (c *cmConn) send(m *cmMsg) error {
	b := appendCM(make([]byte, 0, cmHeaderLen+cmConnLen+len(m.Private)), m)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return net.ErrClosed
	}
	_, err := c.nc.Write(b)
	return err
}

// register makes Close of the link close c.
func (c *cmConn) register() bool { return c.l.conns.Add(c) }

// monitor watches an established connection: a DREQ or the end of the
// channel (the peer closed it, or its process died) moves the QP to ERR
// with EventPeerDisconnected. A DREQ's expected PSN reaches the endpoint
// before the QP fails, so the turn that handles the failure has it.
func (c *cmConn) monitor(qp *soft.QP) {
	c.qp = qp
	c.nc.SetDeadline(time.Time{})
	go func() {
		for {
			m, err := readCM(c.nc)
			if err == nil && m.Type != cmDREQ {
				continue // nothing else is expected; ignore it
			}
			c.mu.Lock()
			mine := c.done
			c.done = true
			c.mu.Unlock()
			c.nc.Close()
			c.unregister()
			if err == nil && m.PSNKnown && c.ep != nil {
				// Even when this side disconnected too: a QP still
				// draining takes it before its flush.
				c.ep.peerExecuted(m.PSN)
			}
			if !mine {
				qp.Fail(provider.EventPeerDisconnected, provider.ErrDisconnected)
			}
			return
		}
	}()
}

func (c *cmConn) unregister() { c.l.conns.Remove(c) }

// disconnect sends a DREQ and closes the channel. It does not wait for the
// peer: a dead peer must not delay the local QP's move to ERR. When known,
// ePSN is the responder's expected PSN, which the DREQ carries (cm_msg.go).
func (c *cmConn) disconnect(ePSN uint32, known bool) {
	c.mu.Lock()
	if !c.done {
		c.nc.SetWriteDeadline(time.Now().Add(time.Second))
		c.nc.Write(appendCM(nil, &cmMsg{Type: cmDREQ, PSN: ePSN, PSNKnown: known}))
	}
	c.mu.Unlock()
	c.close()
}

// close ends the channel without a DREQ; the peer sees it end.
func (c *cmConn) close() {
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
	c.nc.Close()
	c.unregister()
}

// sendREJ refuses the connection, telling the peer why.
func (c *cmConn) sendREJ(pd []byte, reason string) error {
	return c.send(&cmMsg{Type: cmREJ, Private: pd, Reason: reason})
}

// cmRead is the result of a read of the side channel by readAsync.
type cmRead struct {
	m   cmMsg
	err error
}

// readAsync reads one message on a goroutine of its own, which ends with
// the read: a deadline, or closing the channel, stops it.
func (c *cmConn) readAsync() <-chan cmRead {
	ch := make(chan cmRead, 1)
	go func() {
		m, err := readCM(c.nc)
		ch <- cmRead{m, err}
	}()
	return ch
}

// boundPeer is the UDP address the data path may use for the peer that
// sent m (a REQ or REP) on nc: the IP must be the side channel's remote
// IP, which the TCP handshake proved; the port is proven by a probe later
// (cm_probe.go). The error is the reason the connection is refused.
func boundPeer(nc net.Conn, m *cmMsg) (netip.AddrPort, error) {
	ta, ok := nc.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("side channel remote address %v is not TCP", nc.RemoteAddr())
	}
	ip := ta.AddrPort().Addr().Unmap()
	switch {
	case m.Addr.Addr() != ip:
		return netip.AddrPort{}, fmt.Errorf("RoCE address %v is not at the side channel's source IP %v", m.Addr, ip)
	case m.Addr.Port() == 0:
		return netip.AddrPort{}, fmt.Errorf("RoCE address %v has no port", m.Addr)
	}
	return m.Addr, nil
}

// establish attaches a connection's endpoint to qp and moves the QP to RTS.
// peer is the address boundPeer gave and a probe proved.
func (l *link) establish(qp *soft.QP, cm *cmConn, m *cmMsg, peer netip.AddrPort, sqPSN uint32, p provider.ConnParam, ord uint8) (*qpConn, error) {
	return l.startRC(qp, rcAttr{
		qpParams: qpParams{
			dest: m.QPN, peer: peer, rqPSN: m.PSN, mtu: min(m.MTU, l.cfg.PathMTU), ird: p.ResponderResources,
			gso: true, anyPort: l.cfg.AnyPeerPort,
		},
		sqPSN: sqPSN, ord: ord, retry: p.RetryCount, rnrRetry: p.RNRRetryCount,
	}, cm, func() {})
}

// rcAttr is what a connection manager agreed for an RC connection: the
// endpoint's parameters, and the send side's PSN, ORD and retry counts.
type rcAttr struct {
	qpParams
	sqPSN           uint32
	ord             uint8
	retry, rnrRetry uint8
}

// startRC attaches a new endpoint for qp and moves the QP to RTS with a:
// the establishment shared by the side-channel CM (establish) and the IB
// CM's dialer and listener. cm, if not nil, is the side channel the
// endpoint owns. If either step fails, undo runs (before the endpoint is
// detached) and nothing stays attached.
func (l *link) startRC(qp *soft.QP, a rcAttr, cm *cmConn, undo func()) (*qpConn, error) {
	c := newQPConn(l.eng, qp, a.qpParams)
	c.cm = cm
	if err := c.attach(); err != nil {
		undo()
		return nil, err
	}
	err := qp.Establish(c, soft.EstablishAttr{
		DestQPN: a.dest, AV: provider.AddressVector{Addr: a.peer.String()},
		RQPSN: a.rqPSN, SQPSN: a.sqPSN, PathMTU: a.mtu,
		IRD: a.ird, ORD: a.ord,
		RetryCnt: a.retry, RNRRetry: a.rnrRetry,
		Timeout: l.cfg.AckTimeout, MinRNRTime: l.cfg.MinRNRTimer,
	})
	if err != nil {
		undo()
		c.cm = nil
		c.Detach()
		return nil, err
	}
	if cm != nil {
		cm.ep = c
	}
	c.SendReady() // the requester takes its PSN now, not at the first post
	return c, nil
}

// checkPrivateData enforces the side channel's private data limit.
func checkPrivateData(pd []byte) error { return cmkit.CheckPrivateData("roce", pd, MaxPrivateData) }

// ctxErr turns a context's end, or the deadline it set on the side
// channel, into the verbs timeout error. A socket deadline may pass a
// moment before the context's own timer marks it done: the deadline is the
// context's (watch), so that is context.DeadlineExceeded too, and a Dial
// that timed out matches it on every transport.
func ctxErr(ctx context.Context, op, addr string) error {
	err := ctx.Err()
	if err == nil {
		err = context.DeadlineExceeded
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return &OpError{Op: op, Addr: addr, Err: fmt.Errorf("%w: %w", provider.ErrTimeout, err)}
	}
	return &OpError{Op: op, Addr: addr, Err: err}
}

// watch closes nc's deadline when ctx ends, so blocking reads and writes
// return; the returned stop undoes it.
func watch(ctx context.Context, nc net.Conn) (stop func() bool) {
	if d, ok := ctx.Deadline(); ok {
		nc.SetDeadline(d)
	}
	return context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
}
