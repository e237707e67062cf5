//go:build cgo && rdmacore

package rdmacore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/provider"
)

// cq is an ibv_cq with a completion channel of its own. Wait blocks in
// Go's netpoller on a duplicate of the channel's fd, so a waiter parks a
// goroutine, not an OS thread.
type cq struct {
	d  *device
	h  unsafe.Pointer // ibv_cq
	ch unsafe.Pointer // ibv_comp_channel
	f  *os.File       // dup of the channel fd, for the netpoller
	rc syscall.RawConn
	// sem admits one waiter at a time to the fd (its read deadline is the
	// waiter's context); the others wait for it, each on its own context.
	sem chan struct{}

	mu     sync.Mutex // guards what follows; Poll and Wait take it
	buf    *cWC       // C array of batch entries
	stash  []provider.WorkCompletion
	qps    map[uint32]*qp // the QPs that complete here, by QPN
	closed bool
}

func (d *device) CreateCQ(attr provider.CQAttr) (provider.CQ, error) {
	if attr.Entries < 1 || uint64(attr.Entries) > uint64(d.caps.MaxCQE) {
		return nil, fmt.Errorf("%w: CQ of %d entries (1 to %d)", provider.ErrInvalidArgument, attr.Entries, d.caps.MaxCQE)
	}
	if d.isClosed() {
		return nil, provider.ErrClosed
	}
	ch, fd, err := createCompChannel(d.ctx)
	if err != nil {
		return nil, wrap("ibv_create_comp_channel", err)
	}
	f, err := dupFile(fd, "cq channel")
	if err != nil {
		destroyCompChannel(ch)
		return nil, err
	}
	h, cqe, err := createCQ(d.ctx, attr.Entries, ch)
	if err != nil {
		f.Close()
		destroyCompChannel(ch)
		return nil, wrap(fmt.Sprintf("ibv_create_cq of %d entries", attr.Entries), err)
	}
	c := &cq{d: d, h: h, ch: ch, f: f, sem: make(chan struct{}, 1),
		buf: cAlloc[cWC](batch), stash: make([]provider.WorkCompletion, 0, max(cqe, attr.Entries)),
		qps: map[uint32]*qp{}}
	c.rc, _ = f.SyscallConn()
	d.mu.Lock()
	d.cqs[c] = struct{}{}
	d.mu.Unlock()
	return c, nil
}

// Poll returns completions Wait took first, then the device's. It never
// blocks and never allocates.
func (c *cq) Poll(wc []provider.WorkCompletion) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, provider.ErrClosed
	}
	n := copy(wc, c.stash)
	if n > 0 {
		c.stash = append(c.stash[:0], c.stash[n:]...)
	}
	for n < len(wc) {
		k, err := c.pollLocked(wc[n:])
		n += k
		if err != nil {
			return n, err
		}
		if k == 0 {
			break
		}
	}
	return n, nil
}

// pollLocked takes up to one batch from the device into wc.
func (c *cq) pollLocked(wc []provider.WorkCompletion) (int, error) {
	k := pollCQ(c.h, c.buf, min(len(wc), batch))
	if k < 0 {
		return 0, fmt.Errorf("%w: ibv_poll_cq failed (%d)", provider.ErrCQOverrun, k)
	}
	raw := unsafe.Slice(c.buf, k)
	for i := range raw {
		c.convert(&raw[i], &wc[i])
	}
	return k, nil
}

// fillLocked moves what the device holds into the stash; it reports
// whether the stash holds a completion.
func (c *cq) fillLocked() (bool, error) {
	for len(c.stash) < cap(c.stash) {
		n := len(c.stash)
		k, err := c.pollLocked(c.stash[n:cap(c.stash)])
		c.stash = c.stash[:n+k]
		if err != nil {
			return len(c.stash) > 0, err
		}
		if k == 0 {
			break
		}
	}
	return len(c.stash) > 0, nil
}

// hasErrorLocked reports whether the stash holds a failed completion
// (which wakes a solicited-only waiter too).
func (c *cq) hasErrorLocked() bool {
	for i := range c.stash {
		if c.stash[i].Status != provider.StatusSuccess {
			return true
		}
	}
	return false
}

// convert turns an ibv_wc into a WorkCompletion: the wr_id is the slot of
// the QP's ring, which gives back the caller's ID and opcode (libibverbs
// leaves the opcode of a failed completion undefined).
func (c *cq) convert(w *cWC, out *provider.WorkCompletion) {
	*out = provider.WorkCompletion{
		ID: uint64(w.wr_id), Status: provider.Status(w.status), QPN: uint32(w.qp_num),
		ByteLen: uint32(w.byte_len), VendorErr: uint32(w.vendor_err),
	}
	if w.wc_flags&ibvWCWithImm != 0 {
		out.Flags |= provider.WCWithImm
		out.Imm = uint32(w.imm)
	}
	if w.wc_flags&ibvWCWithInv != 0 {
		out.Flags |= provider.WCWithInv
		out.InvalidatedRKey = uint32(w.inv_rkey)
	}
	q := c.qps[out.QPN]
	if q == nil {
		return
	}
	var op provider.WCOpcode
	out.ID, op = q.retire(uint64(w.wr_id))
	out.Opcode = op
	if out.Status != provider.StatusSuccess {
		q.failed()
	} else {
		switch w.opcode {
		case ibvWCRecv:
			out.Opcode = provider.WCRecv
		case ibvWCRecvRDMAImm:
			out.Opcode = provider.WCRecvRDMAImm
		}
	}
}

// Wait blocks until the CQ holds a completion or ctx ends. Solicited-only
// waits arm the CQ for solicited events (ibv_req_notify_cq(cq, 1)): an
// ibv_wc does not say whether it was solicited, so a solicited completion
// that arrived before the call is seen only if it failed.
func (c *cq) Wait(ctx context.Context, solicitedOnly bool) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return provider.ErrClosed
		}
		ready, err := c.check(solicitedOnly)
		if !ready && err == nil {
			if err = reqNotify(c.h, solicitedOnly); err == nil {
				// A completion that came between the check and arming
				// raised no event: look again.
				ready, err = c.check(solicitedOnly)
			}
		}
		c.mu.Unlock()
		if ready || err != nil {
			return err
		}
		got, err := c.waitEvent(ctx)
		if err != nil {
			return err
		}
		if got && solicitedOnly {
			return nil
		}
	}
}

func (c *cq) check(solicitedOnly bool) (bool, error) {
	ready, err := c.fillLocked()
	if solicitedOnly {
		ready = c.hasErrorLocked()
	}
	return ready, err
}

// waitEvent waits for and consumes one event of the completion channel.
func (c *cq) waitEvent(ctx context.Context) (bool, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-c.sem }()
	stop := context.AfterFunc(ctx, func() { c.f.SetReadDeadline(time.Unix(1, 0)) })
	got := false
	err := c.rc.Read(func(uintptr) bool {
		if e := getCQEvent(c.ch); e != nil {
			return !errors.Is(e, syscall.EAGAIN)
		}
		got = true
		return true
	})
	if !stop() {
		// The deadline was set (or is being set): clear it for the next
		// waiter once the AfterFunc has run.
		c.f.SetReadDeadline(time.Time{})
	}
	switch {
	case got:
		return true, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.f.SetReadDeadline(time.Time{})
		return false, ctx.Err()
	case err != nil:
		return false, provider.ErrClosed
	}
	return false, nil
}

func (c *cq) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return provider.ErrClosed
	}
	// ibv_destroy_cq fails while a QP uses the CQ: keep the CQ then. mu
	// keeps Poll and Wait off the handle meanwhile.
	if err := destroyCQ(c.h); err != nil {
		c.mu.Unlock()
		return wrap("ibv_destroy_cq", err)
	}
	c.closed = true
	c.mu.Unlock()
	c.f.Close() // wakes a waiter
	c.sem <- struct{}{}
	destroyCompChannel(c.ch)
	cFree(c.buf)
	c.d.mu.Lock()
	delete(c.d.cqs, c)
	c.d.mu.Unlock()
	return nil
}
