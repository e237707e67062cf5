package shm

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// The poller drives the engine. An application that busy-polls a CQ waits
// for exactly what a connection's engine produces (receive completions,
// acknowledged SENDs): a Poll that finds the CQ empty runs one engine pass
// of every connection whose QP completes into the CQ, on the polling
// goroutine, and polls again. While pollers do so the engine goroutine
// parks (engineLoop), so a busy-polling process runs one spinning thread,
// not two: on a machine with as many CPUs as spinners (two processes on two
// CPUs) the message is served where it is awaited, with no goroutine
// hand-off and no second thread competing for the CPU. The engine's state
// belongs to whoever holds the connection's turn (conn.turn): the engine
// goroutine or one poller.
//
// soft has no hook in its CQ's Poll, so the device soft builds is wrapped:
// the CQs it returns are drivenCQs, and the PDs and MRs are wrapped only to
// hand soft back its own objects (soft recognizes CQs and PDs by type).

// device is the soft device with driven CQs.
type device struct {
	*soft.Device
	l *link
}

func (d *device) CreateCQ(attr provider.CQAttr) (provider.CQ, error) {
	cq, err := d.Device.CreateCQ(attr)
	if err != nil {
		return nil, err
	}
	return &drivenCQ{CQ: cq.(*soft.CQ)}, nil
}

func (d *device) AllocPD() (provider.PD, error) {
	pd, err := d.Device.AllocPD()
	if err != nil {
		return nil, err
	}
	return &wrappedPD{PD: pd.(*soft.PD), l: d.l}, nil
}

// wrappedPD unwraps the CQs of a QP it creates and records which CQs the
// QP completes into, for the connection the QP will have.
type wrappedPD struct {
	*soft.PD
	l *link
}

func (p *wrappedPD) CreateQP(init provider.QPInitAttr) (provider.QP, error) {
	scq, _ := init.SendCQ.(*drivenCQ)
	rcq, _ := init.RecvCQ.(*drivenCQ)
	if scq != nil {
		init.SendCQ = scq.CQ
	}
	if rcq != nil {
		init.RecvCQ = rcq.CQ
	}
	qp, err := p.PD.CreateQP(init)
	if err != nil {
		return nil, err
	}
	if sq, ok := qp.(*soft.QP); ok && (scq != nil || rcq != nil) {
		l, wp := p.l, weak.Make(sq)
		l.mu.Lock()
		l.qpCQs[wp] = [2]*drivenCQ{scq, rcq}
		l.mu.Unlock()
		// The entry lives as long as the QP, across its connections.
		runtime.AddCleanup(sq, func(wp weak.Pointer[soft.QP]) {
			l.mu.Lock()
			delete(l.qpCQs, wp)
			l.mu.Unlock()
		}, wp)
	}
	return qp, nil
}

func (p *wrappedPD) RegisterMR(buf []byte, access provider.Access, mem provider.Memory) (provider.MR, error) {
	mr, err := p.PD.RegisterMR(buf, access, mem)
	if err != nil {
		return nil, err
	}
	return &wrappedMR{MR: mr.(*soft.MR)}, nil
}

// wrappedMR hands soft its own PD on re-registration.
type wrappedMR struct{ *soft.MR }

func (m *wrappedMR) Reregister(flags provider.ReregFlags, pd provider.PD, buf []byte, access provider.Access, mem provider.Memory) error {
	if w, ok := pd.(*wrappedPD); ok {
		pd = w.PD
	}
	return m.MR.Reregister(flags, pd, buf, access, mem)
}

// drivenCQ is a soft CQ whose empty Poll drives the engines of the
// connections completing into it.
type drivenCQ struct {
	*soft.CQ
	mu    sync.Mutex              // serializes changes of conns
	conns atomic.Pointer[[]*conn] // copy on write: Poll reads it without a lock
}

// Poll implements provider.CQ.
func (cq *drivenCQ) Poll(wc []provider.WorkCompletion) (int, error) {
	n, err := cq.CQ.Poll(wc)
	if n > 0 || err != nil || len(wc) == 0 {
		return n, err
	}
	cs := cq.conns.Load()
	if cs == nil {
		return n, err
	}
	progress := false
	for _, c := range *cs {
		if c.drive() {
			progress = true
		}
	}
	if !progress {
		return n, err
	}
	return cq.CQ.Poll(wc)
}

// Wait implements provider.CQ: a goroutine that stops polling to wait
// hands the engines back their own goroutine first.
func (cq *drivenCQ) Wait(ctx context.Context, solicitedOnly bool) error {
	if cs := cq.conns.Load(); cs != nil {
		for _, c := range *cs {
			c.unpark()
		}
	}
	return cq.CQ.Wait(ctx, solicitedOnly)
}

func (cq *drivenCQ) add(c *conn) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	var cs []*conn
	if old := cq.conns.Load(); old != nil {
		cs = append(cs, *old...)
	}
	cs = append(cs, c)
	cq.conns.Store(&cs)
}

func (cq *drivenCQ) remove(c *conn) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	old := cq.conns.Load()
	if old == nil {
		return
	}
	cs := make([]*conn, 0, len(*old))
	for _, o := range *old {
		if o != c {
			cs = append(cs, o)
		}
	}
	cq.conns.Store(&cs)
}

// driveCQs registers c with the CQs its QP completes into (at start) ...
// l.mu orders it against undrive: a connection detached first is not
// registered.
func (l *link) driveCQs(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.detached.Load() {
		return
	}
	c.cqs = l.qpCQs[weak.Make(c.qp)]
	for i, cq := range c.cqs {
		if cq != nil && (i == 0 || cq != c.cqs[0]) {
			cq.add(c)
		}
	}
}

// ... and takes it off them (at Detach, after detached is set).
func (c *conn) undrive() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	for i, cq := range c.cqs {
		if cq != nil && (i == 0 || cq != c.cqs[0]) {
			cq.remove(c)
		}
	}
	c.cqs = [2]*drivenCQ{}
}

// drive runs one engine pass on the polling goroutine if nobody else has
// the turn, and asks the engine goroutine to park. It reports progress.
func (c *conn) drive() bool {
	if !c.polled.Load() {
		c.polled.Store(true)
	}
	if !c.turn.TryLock() {
		return false
	}
	defer c.turn.Unlock()
	if c.detached.Load() {
		return false
	}
	if c.kickEng.Load() {
		c.kickEng.Store(false)
	}
	if !c.eng.pass() {
		return false
	}
	c.cnt.polled.Add(1)
	return true
}

// unpark wakes the engine goroutine if it parked for a poller.
func (c *conn) unpark() {
	c.polled.Store(false)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}
