package conformance

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/verbs"
)

// Listen listens on p.Addr; once listening, it returns the same address.
func (p *LocalPeer) Listen() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return p.ln.Addr(), nil
	}
	ln, err := p.Dev.Listen(p.Addr)
	if err != nil {
		return "", err
	}
	p.ln = ln
	return ln.Addr(), nil
}

func (p *LocalPeer) Accept(ctx context.Context, cfg QPConfig, reply Reply) (Accepted, error) {
	p.mu.Lock()
	ln := p.ln
	p.mu.Unlock()
	if ln == nil {
		return Accepted{}, errors.New("conformance: peer is not listening")
	}
	req, err := ln.Accept(ctx)
	if err != nil {
		return Accepted{}, err
	}
	got := append([]byte(nil), req.PrivateData()...)
	if reply.Reject {
		return Accepted{PrivateData: got}, req.Reject(reply.PrivateData)
	}
	q, err := p.newQP(cfg)
	if err != nil {
		req.Reject(nil)
		return Accepted{}, err
	}
	param := reply.Param
	param.PrivateData = reply.PrivateData
	info, err := req.Accept(ctx, q.qp, param)
	if err != nil {
		return Accepted{}, err
	}
	p.mu.Lock()
	id := p.id()
	p.qps[id] = q
	p.mu.Unlock()
	return Accepted{QP: id, QPN: q.qp.QPN(), PrivateData: got, Info: info}, nil
}

func (p *LocalPeer) newQP(cfg QPConfig) (*localQP, error) {
	pd, err := p.pd(cfg.PD)
	if err != nil {
		return nil, err
	}
	cq, err := p.Dev.CreateCQ(max(cfg.CQEntries, 1))
	if err != nil {
		return nil, err
	}
	qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: cfg.Cap})
	if err != nil {
		cq.Close()
		return nil, err
	}
	if cfg.Access != 0 {
		err := qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Access: cfg.Access}, verbs.AttrState|verbs.AttrAccessFlags)
		if err != nil {
			qp.Close()
			cq.Close()
			return nil, err
		}
	}
	return &localQP{qp: qp, cq: cq}, nil
}

func (p *LocalPeer) RegMR(spec MRSpec) (MRInfo, error) {
	pd, err := p.pd(spec.PD)
	if err != nil {
		return MRInfo{}, err
	}
	p.mu.Lock()
	id := p.id()
	p.mu.Unlock()
	lm := &localMR{}
	switch {
	case spec.File || p.Memfd:
		var r *mem.Region
		if spec.File {
			r, err = mem.MapFile(filepath.Join(p.Dir, "mr"+strconv.Itoa(id)), spec.Size)
		} else {
			r, err = mem.Alloc(spec.Size)
		}
		if err != nil {
			return MRInfo{}, err
		}
		lm.mem = r
		lm.mr, err = pd.RegisterMemory(r, spec.Access)
	default:
		lm.mr, err = pd.RegisterMR(make([]byte, spec.Size), spec.Access)
	}
	if err != nil {
		if lm.mem != nil {
			lm.mem.Close()
		}
		return MRInfo{}, err
	}
	p.mu.Lock()
	p.mrs[id] = lm
	p.mu.Unlock()
	m := lm.mr
	return MRInfo{ID: id, Addr: m.Addr(), Len: m.Len(), LKey: m.LKey(), RKey: m.RKey(), Remote: m.Remote()}, nil
}

func (p *LocalPeer) DeregMR(id int) error {
	m, err := p.mr(id)
	if err != nil {
		return err
	}
	if err := m.mr.Deregister(); err != nil {
		return err
	}
	if m.mem != nil {
		m.mem.Close()
	}
	p.mu.Lock()
	delete(p.mrs, id)
	p.mu.Unlock()
	return nil
}

func (p *LocalPeer) WriteMem(id, off int, b []byte) error {
	m, err := p.mr(id)
	if err != nil {
		return err
	}
	if off < 0 || off+len(b) > m.mr.Len() {
		return fmt.Errorf("conformance: write [%d,+%d) outside region of %d", off, len(b), m.mr.Len())
	}
	copy(m.mr.Bytes()[off:], b)
	return nil
}

func (p *LocalPeer) ReadMem(id, off, n int) ([]byte, error) {
	m, err := p.mr(id)
	if err != nil {
		return nil, err
	}
	if off < 0 || off+n > m.mr.Len() {
		return nil, fmt.Errorf("conformance: read [%d,+%d) outside region of %d", off, n, m.mr.Len())
	}
	return append([]byte(nil), m.mr.Bytes()[off:off+n]...), nil
}

func (p *LocalPeer) PostRecv(id int, wrs []verbs.RecvWR) error {
	q, err := p.qp(id)
	if err != nil {
		return err
	}
	return q.qp.PostRecv(wrs)
}

func (p *LocalPeer) PostSend(id int, wrs []verbs.SendWR) error {
	q, err := p.qp(id)
	if err != nil {
		return err
	}
	return q.qp.PostSend(wrs)
}

func (p *LocalPeer) Poll(id, n int, timeout time.Duration) ([]verbs.WorkCompletion, error) {
	q, err := p.qp(id)
	if err != nil {
		return nil, err
	}
	return PollN(q.cq, n, timeout)
}

func (p *LocalPeer) PollThenClose(id, n int, timeout time.Duration) ([]verbs.WorkCompletion, error) {
	q, err := p.qp(id)
	if err != nil {
		p.Close()
		return nil, err
	}
	wcs, err := PollN(q.cq, n, timeout)
	// No pause between the poll and the close: that is the case.
	p.CloseQP(id)
	p.Close()
	return wcs, err
}

func (p *LocalPeer) Query(id int) (verbs.QPAttr, error) {
	q, err := p.qp(id)
	if err != nil {
		return verbs.QPAttr{}, err
	}
	return q.qp.Query()
}

func (p *LocalPeer) Modify(id int, attr verbs.QPAttr, mask verbs.AttrMask) error {
	q, err := p.qp(id)
	if err != nil {
		return err
	}
	return q.qp.Modify(&attr, mask)
}

func (p *LocalPeer) Disconnect(id int) error {
	q, err := p.qp(id)
	if err != nil {
		return err
	}
	return q.qp.Disconnect()
}

func (p *LocalPeer) CloseQP(id int) error {
	q, err := p.qp(id)
	if err != nil {
		return err
	}
	p.mu.Lock()
	delete(p.qps, id)
	p.mu.Unlock()
	err = q.qp.Close()
	q.cq.Close()
	return err
}

// Kill closes the device at once.
func (p *LocalPeer) Kill() error { return p.Dev.Close() }

// Close releases everything the peer made, then its device.
func (p *LocalPeer) Close() error {
	p.mu.Lock()
	qps, mrs := p.qps, p.mrs
	p.qps, p.mrs = map[int]*localQP{}, map[int]*localMR{}
	ln := p.ln
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	for _, q := range qps {
		q.qp.Close()
		q.cq.Close()
	}
	for _, m := range mrs {
		m.mr.Deregister()
		if m.mem != nil {
			m.mem.Close()
		}
	}
	err := p.Dev.Close()
	if errors.Is(err, verbs.ErrClosed) {
		return nil
	}
	return err
}

// PollN polls cq until it has n completions or timeout passes, and returns
// what it got; it fails only on a CQ error.
func PollN(cq *verbs.CQ, n int, timeout time.Duration) ([]verbs.WorkCompletion, error) {
	out := make([]verbs.WorkCompletion, 0, n)
	buf := make([]verbs.WorkCompletion, n)
	deadline := time.Now().Add(timeout)
	for spin := 0; len(out) < n; spin++ {
		k, err := cq.Poll(buf[:n-len(out)])
		out = append(out, buf[:k]...)
		if err != nil {
			return out, err
		}
		if k > 0 {
			continue
		}
		if time.Now().After(deadline) {
			break
		}
		if spin < 50 {
			continue
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		cq.Wait(ctx)
		cancel()
	}
	return out, nil
}
