package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/verbs"
)

// device is one open device of a side, with the workers that drive its
// connections.
type device struct {
	dev     *verbs.Device
	pd      *verbs.PD
	ln      *verbs.Listener
	workers []*worker
	conns   []*conn
}

// openDevice opens a device and allocates its protection domain.
func openDevice(p provider.Provider) (*device, error) {
	dev, err := verbs.Open(p)
	if err != nil {
		return nil, err
	}
	pd, err := dev.AllocPD()
	if err != nil {
		dev.Close()
		return nil, err
	}
	return &device{dev: dev, pd: pd}, nil
}

// addWorkers creates threads workers, each with its own CQ, for n
// connections of the device to be spread over.
func (d *device) addWorkers(threads, n int, p *params, cfg *Config, test string) error {
	perWorker := (n + threads - 1) / threads
	entries := max(perWorker, 1) * (p.TxDepth + reserveSend + p.RxDepth + reserveRecv)
	for range min(threads, max(n, 1)) {
		cq, err := d.dev.CreateCQ(entries)
		if err != nil {
			return err
		}
		d.workers = append(d.workers, &worker{
			cq: cq, byQPN: map[uint32]*conn{}, wcs: make([]verbs.WorkCompletion, 64),
			events: cfg.Events, stall: cfg.stall(), validate: cfg.Validate, test: test,
		})
	}
	return nil
}

// regionAccess are the rights of every connection buffer: the tests use
// all of them, and registering once keeps setup out of the measurement.
const regionAccess = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic

// addConn creates connection idx on the device: a QP on the next worker's
// CQ and a registered, prefaulted buffer whose receive slots hold their
// patterns (the sources of READ tests).
func (d *device) addConn(idx int, p *params, r ramp) (*conn, error) {
	w := d.workers[len(d.conns)%len(d.workers)]
	qp, err := d.pd.CreateQP(verbs.QPInitAttr{SendCQ: w.cq, RecvCQ: w.cq, Cap: verbs.QPCap{
		MaxSendWR: uint32(p.TxDepth + reserveSend), MaxRecvWR: uint32(p.RxDepth + reserveRecv),
		MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: uint32(p.Inline),
	}})
	if err != nil {
		return nil, err
	}
	c := &conn{idx: idx, p: p, r: r, qp: qp, sq: newSendQueue(p.TxDepth+reserveSend, p.CQMod), credits: p.RxDepth}
	d.conns = append(d.conns, c)
	w.conns = append(w.conns, c)
	w.byQPN[qp.QPN()] = c
	if c.region, err = mem.Alloc(int(p.bufLen()), mem.Prefault); err != nil {
		return nil, err
	}
	if c.mr, err = d.pd.RegisterMemory(c.region, regionAccess); err != nil {
		return nil, err
	}
	c.buf = c.mr.Bytes()
	for j := range p.RxSlots {
		r.fill(c.rxSlot(uint64(j)), uint64(j))
	}
	return c, nil
}

// connParam is what a side offers when connecting: its buffer and the
// connection's index as private data, and the READ and atomic depth the
// test needs.
func (c *conn) connParam(caps verbs.Caps) verbs.ConnParam {
	pd := binary.BigEndian.AppendUint32(nil, uint32(c.idx))
	pd, _ = c.mr.Remote().AppendBinary(pd)
	return verbs.ConnParam{
		PrivateData:        pd,
		ResponderResources: caps.MaxQPInitRdAtom,
		InitiatorDepth:     uint8(min(c.p.TxDepth, int(caps.MaxQPRdAtom), 255)),
	}
}

// parsePrivateData reads a peer's connection index and buffer. A CM whose
// messages have no length field hands back the private data field as it
// is: the IB CM over roce without its trailing zero bytes (an rkey that
// ends in 0x00 loses them), rdma_cm padded with zeros to the field's size.
// Both are taken, the zeros put back or dropped.
func parsePrivateData(b []byte) (int, verbs.RemoteBuf, error) {
	var rb verbs.RemoteBuf
	const n = 4 + verbs.RemoteBufSize
	switch {
	case len(b) > n && len(bytes.TrimRight(b[n:], "\x00")) == 0:
		b = b[:n]
	case len(b) < n && len(b) > 4:
		b = append(bytes.Clone(b), make([]byte, n-len(b))...)
	}
	if len(b) != n {
		return 0, rb, fmt.Errorf("bench: connection private data of %d bytes, want %d", len(b), n)
	}
	err := rb.UnmarshalBinary(b[4:])
	return int(binary.BigEndian.Uint32(b)), rb, err
}

// connected finishes a connection: the peer's buffer, and the receives
// every test keeps posted (data receives and the reserve for control
// messages).
func (c *conn) connected(pdata []byte) error {
	idx, rb, err := parsePrivateData(pdata)
	if err != nil {
		return err
	}
	if idx != c.idx || rb.Len < uint64(c.p.bufLen()) {
		return fmt.Errorf("bench: connection %d: the peer answered for connection %d with a %d-byte buffer", c.idx, idx, rb.Len)
	}
	c.remote = rb
	for i := range c.p.RxDepth + reserveRecv {
		if err := c.postRecv(uint64(i)); err != nil {
			return err
		}
	}
	return nil
}

// listenNames makes loopback listener names unique within the process.
var listenNames atomic.Int64

// accept answers the n connection requests addressed to the device,
// matching each to the connection its private data names.
func (d *device) accept(ctx context.Context, n int) error {
	for range n {
		req, err := d.ln.Accept(ctx)
		if err != nil {
			return err
		}
		idx, _, err := parsePrivateData(req.PrivateData())
		var c *conn
		for _, dc := range d.conns {
			if err == nil && dc.idx == idx && dc.remote.Len == 0 {
				c = dc
			}
		}
		if c == nil {
			req.Reject(nil)
			return errors.Join(err, fmt.Errorf("bench: unexpected connection request for connection %d", idx))
		}
		if _, err := req.Accept(ctx, c.qp, c.connParam(d.dev.Caps())); err != nil {
			return err
		}
		if err := c.connected(req.PrivateData()); err != nil {
			return err
		}
	}
	return nil
}

// dial connects c to the listener at addr.
func (d *device) dial(ctx context.Context, addr string, c *conn) error {
	info, err := d.dev.Dial(ctx, addr, c.qp, c.connParam(d.dev.Caps()))
	if err != nil {
		return fmt.Errorf("bench: connecting QP %d to %s: %w", c.idx, addr, err)
	}
	return c.connected(info.PrivateData)
}

// close releases the device and everything on it. Regions are closed
// after their registrations, and the device last.
func (d *device) close() error {
	var errs []error
	for _, c := range d.conns {
		errs = append(errs, ignoreClosed(c.qp.Close()))
		if c.mr != nil {
			errs = append(errs, ignoreClosed(c.mr.Deregister()))
		}
		if c.region != nil {
			errs = append(errs, c.region.Close())
		}
	}
	if d.ln != nil {
		errs = append(errs, ignoreClosed(d.ln.Close()))
	}
	for _, w := range d.workers {
		errs = append(errs, ignoreClosed(w.cq.Close()))
	}
	errs = append(errs, ignoreClosed(d.pd.Close()), ignoreClosed(d.dev.Close()))
	return errors.Join(errs...)
}

func ignoreClosed(err error) error {
	if errors.Is(err, verbs.ErrClosed) {
		return nil
	}
	return err
}
