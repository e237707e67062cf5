//go:build cgo && rdmacore

package rdmacore

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"unsafe"

	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// recvBit marks the wr_id of a receive: a failed completion's opcode is
// undefined in libibverbs, the wr_id alone says which queue it belongs to.
const recvBit = 1 << 63

// slot is one posted WR: the caller's ID and opcode (the device carries
// the slot's sequence number as wr_id) and the regions its SGEs name.
type slot struct {
	id  uint64
	op  provider.WCOpcode
	mrs []*mr
}

// ring is a work queue as goverbs counts it: slots [head, tail) are posted
// and not yet retired by a completion. Its depth is the caller's
// max_*_wr, whatever the device rounded it up to.
type ring struct {
	slots      []slot
	head, tail uint64
}

func newRing(depth, sge uint32) ring {
	r := ring{slots: make([]slot, depth)}
	for i := range r.slots {
		r.slots[i].mrs = make([]*mr, 0, sge)
	}
	return r
}

func (r *ring) free() uint64 { return uint64(len(r.slots)) - (r.tail - r.head) }

// retireTo retires every slot up to and including seq (completions of a
// queue arrive in order; unsignaled WRs complete with the next signaled
// one) and returns seq's ID and opcode.
func (r *ring) retireTo(seq uint64) (uint64, provider.WCOpcode, bool) {
	if len(r.slots) == 0 || seq >= r.tail || r.tail-seq > uint64(len(r.slots)) {
		return seq, 0, false
	}
	s := &r.slots[seq%uint64(len(r.slots))]
	id, op := s.id, s.op
	for ; r.head <= seq; r.head++ {
		h := &r.slots[r.head%uint64(len(r.slots))]
		for _, m := range h.mrs {
			m.refs.Add(-1)
		}
		h.mrs = h.mrs[:0]
	}
	return id, op, true
}

// qp is an ibv_qp of type RC. mu guards every field below it; the CQs'
// polls take it (cq.mu, then qp.mu) to retire slots.
type qp struct {
	d        *device
	h        unsafe.Pointer
	qpn      uint32
	scq, rcq *cq

	mu     sync.Mutex
	state  provider.State
	closed bool
	cap    provider.QPCap
	sq, rq ring
	swr    *cSendWR // C arrays of one batch
	rwr    *cRecvWR
	id     uint64 // the connection's rdma_cm_id, 0 when none
}

func (p *pd) CreateQP(attr provider.QPInitAttr) (provider.QP, error) {
	scq, ok1 := attr.SendCQ.(*cq)
	rcq, ok2 := attr.RecvCQ.(*cq)
	if !ok1 || !ok2 || scq.d != p.d || rcq.d != p.d {
		return nil, fmt.Errorf("%w: CQ of another device", provider.ErrInvalidArgument)
	}
	c, dc := attr.Cap, &p.d.caps
	switch {
	case c.MaxSendWR == 0:
		return nil, fmt.Errorf("%w: a send queue of 0 WRs", provider.ErrInvalidArgument)
	case c.MaxSendWR > dc.MaxQPWR || c.MaxRecvWR > dc.MaxQPWR:
		return nil, fmt.Errorf("%w: queue of %d/%d WRs exceeds max_qp_wr %d", provider.ErrInvalidArgument, c.MaxSendWR, c.MaxRecvWR, dc.MaxQPWR)
	case c.MaxSendSGE > dc.MaxSGE || c.MaxRecvSGE > dc.MaxSGE:
		return nil, fmt.Errorf("%w: %d/%d SGEs exceed max_sge %d", provider.ErrInvalidArgument, c.MaxSendSGE, c.MaxRecvSGE, dc.MaxSGE)
	case c.MaxInlineData > dc.MaxInlineData:
		return nil, fmt.Errorf("%w: %d bytes inline exceed %d", provider.ErrInvalidArgument, c.MaxInlineData, dc.MaxInlineData)
	}
	qc := qpCap{max_send_wr: cuint(max(c.MaxSendWR, 1)), max_recv_wr: cuint(max(c.MaxRecvWR, 1)),
		max_send_sge: cuint(max(c.MaxSendSGE, 1)), max_recv_sge: cuint(max(c.MaxRecvSGE, 1)),
		max_inline_data: cuint(c.MaxInlineData)}
	h, qpn, err := createQP(p.h, scq.h, rcq.h, &qc, attr.SignalAll)
	if err != nil {
		return nil, wrap("ibv_create_qp", err)
	}
	// The caller's depths and SGE counts are the queue's (post-time checks
	// follow what was asked); inline data is what the device granted.
	c.MaxInlineData = min(uint32(qc.max_inline_data), dc.MaxInlineData)
	q := &qp{d: p.d, h: h, qpn: qpn, scq: scq, rcq: rcq, cap: c,
		sq: newRing(c.MaxSendWR, c.MaxSendSGE), rq: newRing(c.MaxRecvWR, c.MaxRecvSGE),
		swr: cAlloc[cSendWR](batch), rwr: cAlloc[cRecvWR](batch)}
	for _, cq := range []*cq{scq, rcq} {
		cq.mu.Lock()
		cq.qps[qpn] = q
		cq.mu.Unlock()
	}
	p.d.mu.Lock()
	p.d.qps[q] = struct{}{}
	p.d.mu.Unlock()
	return q, nil
}

func (q *qp) QPN() uint32 { return q.qpn }

// retire gives back the ID and opcode of the WR whose wr_id a completion
// carries.
func (q *qp) retire(wrid uint64) (uint64, provider.WCOpcode) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if wrid&recvBit != 0 {
		id, op, ok := q.rq.retireTo(wrid &^ recvBit)
		if !ok {
			return wrid, provider.WCRecv
		}
		return id, op
	}
	id, op, _ := q.sq.retireTo(wrid)
	return id, op
}

// failed records that a WR of the QP completed in error: an RC QP is then
// in ERR (IBA 10.8.3), whether or not the device says so in Query.
func (q *qp) failed() {
	q.mu.Lock()
	if q.state != provider.StateReset {
		q.state = provider.StateErr
	}
	q.mu.Unlock()
}

var ibvOpcode = [...]uint32{
	provider.OpSend: ibvWRSend, provider.OpSendWithImm: ibvWRSendImm, provider.OpSendWithInv: ibvWRSendInv,
	provider.OpWrite: ibvWRWrite, provider.OpWriteWithImm: ibvWRWriteImm, provider.OpRead: ibvWRRead,
	provider.OpCompareSwap: ibvWRCmpSwap, provider.OpFetchAdd: ibvWRFetchAdd,
}

func (q *qp) PostSend(wrs []provider.SendWR) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	t := provider.PostTarget{State: q.state, Closed: q.closed, Depth: len(q.sq.slots), Free: q.sq.free(), Cap: &q.cap, Dev: &q.d.caps}
	if err := t.CheckSends(wrs, nil); err != nil {
		return err
	}
	for i := range wrs {
		if wrs[i].Opcode == provider.OpRead && len(wrs[i].SGL) > q.d.maxSGERd {
			return &provider.PostError{Op: "post send", Index: i, ID: wrs[i].ID,
				Err: fmt.Errorf("%w: a READ into %d SGEs (%s scatters a READ into at most %d, max_sge_rd)",
					provider.ErrNotSupported, len(wrs[i].SGL), q.d.name, q.d.maxSGERd)}
		}
	}
	for start := 0; start < len(wrs); start += batch {
		chunk := wrs[start:min(start+batch, len(wrs))]
		cw := unsafe.Slice(q.swr, len(chunk))
		first := q.sq.tail
		for i := range chunk {
			q.fillSend(&cw[i], &chunk[i])
		}
		if bad, err := postSend(q.h, q.swr, len(chunk)); err != nil {
			q.unpost(&q.sq, first+uint64(bad))
			i := start + bad
			return &provider.PostError{Op: "post send", Index: i, ID: wrs[i].ID, Err: wrap("ibv_post_send", err)}
		}
	}
	return nil
}

// fillSend writes wr into the C batch entry w and takes its slot.
func (q *qp) fillSend(w *cSendWR, wr *provider.SendWR) {
	r := &q.sq
	s := &r.slots[r.tail%uint64(len(r.slots))]
	s.id, s.op = wr.ID, wr.Opcode.CompletionOpcode()
	w.wr_id = cu64(r.tail)
	r.tail++
	w.opcode = cuint(ibvOpcode[wr.Opcode])
	f := uint32(0)
	if wr.Flags&provider.SendSignaled != 0 {
		f |= ibvSendSignaled
	}
	if wr.Flags&provider.SendFence != 0 {
		f |= ibvSendFence
	}
	if wr.Flags&provider.SendSolicited != 0 {
		f |= ibvSendSolicited
	}
	inline := wr.Flags&provider.SendInline != 0
	if inline {
		f |= ibvSendInline
	}
	w.flags = cuint(f)
	w.nsge = cuint(uint32(len(wr.SGL)))
	for j, g := range wr.SGL {
		w.sge[j].addr, w.sge[j].length, w.sge[j].lkey = cu64(g.Addr), cuint(g.Length), cuint(g.LKey)
		if !inline {
			if m := q.d.lookupMR(g.LKey); m != nil {
				m.refs.Add(1)
				s.mrs = append(s.mrs, m)
			}
		}
	}
	w.raddr, w.rkey = cu64(wr.Remote.Addr), cuint(wr.Remote.RKey)
	w.cmp, w.swap = cu64(wr.CompareAdd), cu64(wr.Swap)
	w.imm, w.inv_rkey = cuint(wr.Imm), cuint(wr.InvalidateRKey)
}

// unpost gives back the slots from seq on, which the device refused.
func (q *qp) unpost(r *ring, seq uint64) {
	for s := seq; s < r.tail; s++ {
		h := &r.slots[s%uint64(len(r.slots))]
		for _, m := range h.mrs {
			m.refs.Add(-1)
		}
		h.mrs = h.mrs[:0]
	}
	r.tail = seq
}

func (q *qp) PostRecv(wrs []provider.RecvWR) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	t := provider.PostTarget{State: q.state, Closed: q.closed, Depth: len(q.rq.slots), Free: q.rq.free(), Cap: &q.cap, Dev: &q.d.caps}
	if err := t.CheckRecvs(wrs); err != nil {
		return err
	}
	r := &q.rq
	for start := 0; start < len(wrs); start += batch {
		chunk := wrs[start:min(start+batch, len(wrs))]
		cw := unsafe.Slice(q.rwr, len(chunk))
		first := r.tail
		for i := range chunk {
			s := &r.slots[r.tail%uint64(len(r.slots))]
			s.id, s.op = chunk[i].ID, provider.WCRecv
			cw[i].wr_id = cu64(r.tail | recvBit)
			r.tail++
			cw[i].nsge = cuint(uint32(len(chunk[i].SGL)))
			for j, g := range chunk[i].SGL {
				cw[i].sge[j].addr, cw[i].sge[j].length, cw[i].sge[j].lkey = cu64(g.Addr), cuint(g.Length), cuint(g.LKey)
				if m := q.d.lookupMR(g.LKey); m != nil {
					m.refs.Add(1)
					s.mrs = append(s.mrs, m)
				}
			}
		}
		if bad, err := postRecv(q.h, q.rwr, len(chunk)); err != nil {
			q.unpost(r, first+uint64(bad))
			i := start + bad
			return &provider.PostError{Op: "post recv", Index: i, ID: wrs[i].ID, Err: wrap("ibv_post_recv", err)}
		}
	}
	if q.state == provider.StateErr {
		return q.ringRecvFlush()
	}
	return nil
}

// ringRecvFlush makes the device flush receives posted to a QP in ERR.
// A receive queue has no doorbell on rxe: libibverbs' rxe provider
// (rdma-core providers/rxe/rxe.c, rxe_post_recv) only writes the shared
// ring, and the kernel flushes that ring only when its responder task runs
// in the error state (drivers/infiniband/sw/rxe/rxe_resp.c,
// check_resource), which a packet or a move to ERR schedules (rxe_qp.c,
// rxe_qp_error). ERR -> ERR is a legal transition (IBA 10.3.1; the
// kernel's qp_state_table) that schedules it, so the flush completions are
// the device's own. Devices that flush at post time take it as a no-op
// (siw_qp_modify ignores it). Called with q.mu held.
func (q *qp) ringRecvFlush() error {
	a := qpAttr{qp_state: ibvQPSErr}
	if err := modifyQP(q.h, &a, ibvQPState); err != nil {
		return wrap("ibv_modify_qp ERR -> ERR (flush the receives posted in ERR)", err)
	}
	return nil
}

// attrMap pairs goverbs' attribute bits with ibv_qp_attr_mask's.
var attrMap = []struct {
	g provider.AttrMask
	i int
}{
	{provider.AttrState, ibvQPState}, {provider.AttrCurState, ibvQPCurState},
	{provider.AttrAccessFlags, ibvQPAccess}, {provider.AttrPKeyIndex, ibvQPPKey},
	{provider.AttrPort, ibvQPPort}, {provider.AttrAV, ibvQPAV}, {provider.AttrPathMTU, ibvQPPathMTU},
	{provider.AttrTimeout, ibvQPTimeout}, {provider.AttrRetryCnt, ibvQPRetry},
	{provider.AttrRNRRetry, ibvQPRNRRetry}, {provider.AttrRQPSN, ibvQPRQPSN},
	{provider.AttrMaxQPRdAtomic, ibvQPMaxRd}, {provider.AttrMinRNRTimer, ibvQPMinRNR},
	{provider.AttrSQPSN, ibvQPSQPSN}, {provider.AttrMaxDestRdAtomic, ibvQPMaxDestRd},
	{provider.AttrDestQPN, ibvQPDestQPN}, {provider.AttrEnSQDAsyncNotify, ibvQPSQDNotify},
}

func mtuEnum(m provider.MTU) int {
	e := 1
	for v := provider.MTU(256); v < m; v <<= 1 {
		e++
	}
	return e
}

// Modify checks the transition and values as every goverbs provider does,
// then hands them to ibv_modify_qp.
func (q *qp) Modify(attr *provider.QPAttr, mask provider.AttrMask) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return provider.ErrClosed
	}
	next, err := provider.CheckTransition(q.state, attr, mask)
	if err != nil {
		return err
	}
	if err := provider.CheckQPAttr(attr, mask, &q.d.caps); err != nil {
		return err
	}
	if next == provider.StateSQD && q.d.iwarp {
		return fmt.Errorf("%w: iWARP QPs have no SQD state (siw maps it to closing the connection)", provider.ErrNotSupported)
	}
	var a qpAttr
	im := 0
	for _, m := range attrMap {
		if mask&m.g != 0 {
			im |= m.i
		}
	}
	a.qp_state = uint32(next)
	a.cur_qp_state = uint32(attr.CurState)
	if q.state == provider.StateReset && next == provider.StateInit {
		im |= ibvQPPKey | ibvQPPort // libibverbs requires them; goverbs' port is 1, P_Key index 0
	}
	a.port_num, a.pkey_index = 1, 0
	if mask&provider.AttrAccessFlags != 0 {
		f, err := ibvAccess(attr.Access &^ provider.AccessLocalWrite)
		if err != nil {
			return err
		}
		a.qp_access_flags = cuint(uint32(f))
	}
	if mask&provider.AttrAV != 0 {
		if !q.d.caps.ManualConnect {
			return fmt.Errorf("%w: %s connects only through the connection manager", provider.ErrNotSupported, q.d.caps.Transport)
		}
		gid := attr.AV.GID
		if gid == ([16]byte{}) && attr.AV.Addr == "" {
			gid = q.d.gid // no peer named: a QP of this device
		} else if gid == ([16]byte{}) {
			host := attr.AV.Addr
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			ip := net.ParseIP(host).To4()
			if ip == nil {
				return fmt.Errorf("%w: address vector names neither a GID nor an IPv4 address (%q)", provider.ErrInvalidArgument, attr.AV.Addr)
			}
			copy(gid[:], net.IPv4(ip[0], ip[1], ip[2], ip[3]).To16())
		}
		hop := attr.AV.HopLimit
		if hop == 0 {
			hop = 64
		}
		setAV(&a, gid, q.d.gidIndex, hop, attr.AV.TrafficClass)
	}
	a.path_mtu = uint32(mtuEnum(attr.PathMTU))
	a.timeout, a.retry_cnt, a.rnr_retry = cu8(attr.Timeout), cu8(attr.RetryCnt), cu8(attr.RNRRetry)
	a.rq_psn, a.sq_psn, a.dest_qp_num = cuint(attr.RQPSN), cuint(attr.SQPSN), cuint(attr.DestQPN)
	a.max_rd_atomic, a.max_dest_rd_atomic, a.min_rnr_timer = cu8(attr.MaxRdAtomic), cu8(attr.MaxDestRdAtomic), cu8(attr.MinRNRTimer)
	if err := modifyQP(q.h, &a, im); err != nil {
		return wrap(fmt.Sprintf("ibv_modify_qp %v -> %v", q.state, next), err)
	}
	q.setStateLocked(next)
	return nil
}

// setStateLocked records a state the QP reached; RESET empties both queues
// without completions (IBA 10.3.1), so their slots go back.
func (q *qp) setStateLocked(s provider.State) {
	q.state = s
	if s == provider.StateReset {
		q.unpost(&q.sq, q.sq.head)
		q.unpost(&q.rq, q.rq.head)
	}
}

func (q *qp) Query() (provider.QPAttr, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return provider.QPAttr{}, provider.ErrClosed
	}
	a, _, err := queryQP(q.h)
	if err != nil {
		return provider.QPAttr{}, wrap("ibv_query_qp", err)
	}
	// The kernel moves a QP to ERR (or SQE) on its own; Query reports it.
	// Other states are goverbs' own record: siw reports no state at all.
	if ks := provider.State(a.qp_state); ks == provider.StateErr || ks == provider.StateSQE {
		q.state = ks
	}
	out := provider.QPAttr{
		State: q.state, CurState: q.state, Access: fromIBVAccess(int(a.qp_access_flags)),
		Port: 1, PathMTU: 128 << a.path_mtu,
		Timeout: uint8(a.timeout), RetryCnt: uint8(a.retry_cnt), RNRRetry: uint8(a.rnr_retry),
		RQPSN: uint32(a.rq_psn), SQPSN: uint32(a.sq_psn), MaxRdAtomic: uint8(a.max_rd_atomic),
		MaxDestRdAtomic: uint8(a.max_dest_rd_atomic), MinRNRTimer: uint8(a.min_rnr_timer),
		DestQPN: uint32(a.dest_qp_num), Cap: q.cap, SQDraining: a.sq_draining != 0,
	}
	if a.path_mtu == 0 {
		out.PathMTU = 0
	}
	if q.d.iwarp && strings.HasPrefix(q.d.name, "siw") {
		// siw reports its IRD as max_rd_atomic and its ORD as
		// max_dest_rd_atomic (siw_verbs.c siw_query_qp: irq_size,
		// orq_size), the reverse of IBA's meaning (11.2.5.3).
		out.MaxRdAtomic, out.MaxDestRdAtomic = out.MaxDestRdAtomic, out.MaxRdAtomic
	}
	if q.d.caps.ManualConnect {
		out.AV.GID = avGID(&a)
		out.AV.HopLimit = uint8(a.ah_attr.grh.hop_limit)
		out.AV.TrafficClass = uint8(a.ah_attr.grh.traffic_class)
		if ip := net.IP(out.AV.GID[:]).To4(); ip != nil && !ip.IsUnspecified() {
			out.AV.Addr = ip.String()
		}
	}
	return out, nil
}

// toErrLocked moves the QP to ERR, flushing what is outstanding.
func (q *qp) toErrLocked() error {
	a := qpAttr{qp_state: ibvQPSErr}
	if err := modifyQP(q.h, &a, ibvQPState); err != nil {
		return wrap("ibv_modify_qp -> ERR", err)
	}
	q.state = provider.StateErr
	return nil
}

func (q *qp) Disconnect() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return provider.ErrClosed
	}
	if q.id != 0 {
		disconnectID(q.id)
	}
	return q.toErrLocked()
}

func (q *qp) Close() error {
	q.mu.Lock()
	if err := devcore.CloseOnce(&q.closed); err != nil {
		q.mu.Unlock()
		return err
	}
	id := q.id
	q.id = 0
	if id != 0 {
		disconnectID(id)
	}
	q.toErrLocked()
	q.mu.Unlock()
	if id != 0 {
		q.d.cm.forget(id)
		destroyID(id)
	}
	err := destroyQP(q.h)
	q.mu.Lock()
	// The slots stay readable for the flushed completions still in the
	// CQs; their regions are free now.
	for _, r := range []*ring{&q.sq, &q.rq} {
		for s := r.head; s < r.tail; s++ {
			h := &r.slots[s%uint64(len(r.slots))]
			for _, m := range h.mrs {
				m.refs.Add(-1)
			}
			h.mrs = h.mrs[:0]
		}
	}
	cFree(q.swr)
	cFree(q.rwr)
	q.swr, q.rwr = nil, nil
	q.mu.Unlock()
	q.d.mu.Lock()
	delete(q.d.qps, q)
	q.d.mu.Unlock()
	if err != nil {
		return wrap("ibv_destroy_qp", err)
	}
	return nil
}
