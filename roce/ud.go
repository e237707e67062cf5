package roce

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/internal/iovec"
	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// UD queue pairs (IBA Vol 1 §9.8 for the service, §10.2.4 for Q_Keys).
//
// A UD QP has no connection and no reliability: each send WQE becomes one
// SEND_ONLY datagram (BTH, DETH with the Q_Key and this QP's number,
// ImmDt for SEND_WITH_IMM) to the address its WR's handle names, and it
// completes as soon as the datagram is in the socket, as on rxe. A payload
// above the device's path MTU completes with LOC_LEN_ERR. On receive the
// DETH's Q_Key must be the QP's; the receive buffer gets the 40-byte GRH
// (ib.PutGRH: rxe's layout, the IPv4 header in its last 20 bytes) and then
// the payload, and the completion names the sender's QP. A datagram that
// finds no receive, a wrong Q_Key or a QP not ready is dropped and counted.
//
// Sends are built on the poster's goroutine, outside the turn (a UD SEND
// needs no state of the turn's; sendMu makes one sender at a time and
// pending hands work to it, see SendReady); only the socket write takes
// the turn, which owns the socket seam. Receives
// are placed by the turn that parsed them, like RC requests.
type udQP struct {
	e   *engine
	qp  *soft.QP
	qpn uint32
	mtu int

	pending  atomic.Bool // SendReady was called since the sender last looked
	errored  atomic.Bool // the QP entered ERR: take no more WQEs
	detached atomic.Bool
	ctr      counters

	sendMu  sync.Mutex // the sender; guards the fields below
	psn     uint32
	hdr     [ib.UDImmHeaderLen]byte
	trailer [3 + ib.ICRCLen]byte
	pieces  [][]byte
	msgs    [1]Message
	crc     seedCache
}

var (
	_ soft.Endpoint          = (*udQP)(nil)
	_ provider.CounterSource = (*udQP)(nil)
)

// CreateAH implements soft.AHLink: the handle resolves to the peer's UDP
// address, by the rules of a manual connection's address vector.
func (l *link) CreateAH(av provider.AddressVector) (any, error) {
	ap, err := l.peerAddr(av)
	if err != nil {
		return nil, err
	}
	return ap, nil
}

// connectUD attaches a UD QP on its move to RTR.
func (l *link) connectUD(qp *soft.QP) (soft.Endpoint, error) {
	u := &udQP{e: l.eng, qp: qp, qpn: qp.QPN(), mtu: int(l.cfg.PathMTU), psn: soft.NewPSN()}
	u.crc.local = l.eng.tx.local
	u.pieces = make([][]byte, 0, qp.Attr().Cap.MaxSendSGE+3)
	e := l.eng
	e.mu.Lock()
	stopped := e.stopped
	if !stopped {
		e.uds[u.qpn] = u
	}
	e.mu.Unlock()
	e.kick()
	if stopped {
		return nil, errEngineClosed
	}
	return u, nil
}

// SendReady implements soft.Endpoint. Whoever gets sendMu sends; one that
// finds it taken leaves pending for the holder, which looks again after
// it lets go (the soft device may call SendReady from within NextSend or
// CompleteSend on the sender's own goroutine).
func (u *udQP) SendReady() {
	u.pending.Store(true)
	for u.pending.Load() && u.sendMu.TryLock() {
		u.pending.Store(false)
		u.drain()
		u.sendMu.Unlock()
	}
}

// drain sends every WQE the QP hands out.
// Precondition: sendMu is held.
func (u *udQP) drain() {
	for !u.errored.Load() && !u.detached.Load() {
		w := u.qp.NextSend()
		if w == nil {
			return
		}
		u.qp.CompleteSend(w, u.send(w), 0)
	}
}

// send writes one WQE as a datagram and returns its completion status.
// Precondition: sendMu is held.
func (u *udQP) send(w *soft.SendWQE) provider.Status {
	var dst netip.AddrPort
	if w.WR.AH != nil {
		dst, _ = w.WR.AH.Resolved().(netip.AddrPort)
	}
	switch {
	case !dst.IsValid():
		return provider.StatusLocQPOpErr
	case w.Len > uint64(u.mtu):
		return provider.StatusLocLenErr
	}
	n := int(w.Len)
	qkey := w.WR.RemoteQKey
	if qkey&0x80000000 != 0 {
		qkey = u.qp.QKey() // IBA 10.2.4: the high bit selects the QP's own
	}
	op, hlen := ib.OpUDSendOnly, ib.UDHeaderLen
	if w.WR.Opcode == provider.OpSendWithImm {
		op, hlen = ib.OpUDSendOnlyImm, ib.UDImmHeaderLen
		ib.ImmDt(u.hdr[ib.UDHeaderLen:]).SetImm(w.WR.Imm)
	}
	pad := ib.PadLen(n)
	ib.BTH(u.hdr[:]).Encode(&ib.BTHFields{
		Opcode: op, SE: w.WR.Flags&provider.SendSolicited != 0, PadCnt: uint8(pad),
		PKey: ib.DefaultPKey, DestQP: w.WR.RemoteQPN, PSN: ib.PSN(u.psn),
	})
	u.psn = (u.psn + 1) & 0xFFFFFF
	ib.DETH(u.hdr[ib.BTHLen:]).Encode(&ib.DETHFields{QKey: qkey, SrcQP: u.qpn})
	u.pieces = append(u.pieces[:0], u.hdr[:hlen])
	u.pieces = iovec.AppendRange(u.pieces, w.Local, 0, uint64(n))
	clear(u.trailer[:pad])
	u.pieces = append(u.pieces, u.trailer[:pad])
	crc, err := u.crc.icrc(dst, u.pieces[0], u.pieces[1:])
	if err != nil {
		u.ctr.inc(ctrTxErrors)
		return provider.StatusLocQPOpErr
	}
	ib.PutICRC(u.trailer[pad:], crc)
	u.pieces[len(u.pieces)-1] = u.trailer[:pad+ib.ICRCLen]
	u.msgs[0] = Message{Buffers: u.pieces, Addr: dst}
	if err := u.e.writeDatagram(u.msgs[:]); err != nil {
		// Unreliable: a datagram the socket refused is a datagram lost.
		u.ctr.inc(ctrTxErrors)
		u.e.dev.inc(ctrTxErrors)
	} else {
		u.ctr.inc(ctrTxPackets)
		u.ctr.add(ctrTxBytes, uint64(n))
		u.e.dev.inc(ctrTxDatagrams)
	}
	u.msgs[0] = Message{}
	return provider.StatusSuccess
}

// writeDatagram sends ms from the device's socket. The socket seam is
// written only by the turn's holder, so it takes the turn, as sendProbe
// does; no UD sender holds the turn when it gets here (the soft device
// calls SendReady from posting, Modify and CompleteSend, never from a
// turn).
func (e *engine) writeDatagram(ms []Message) error {
	e.mu.Lock()
	err := errEngineClosed
	if !e.stopped {
		raceSend(ms[0].Addr)
		_, err = e.conn.WriteBatch(ms)
	}
	e.mu.Unlock()
	e.kick() // work queued while we held the turn's lock
	return err
}

// RecvReady implements soft.Endpoint: a datagram that found no receive
// was dropped, so there is nothing to resume.
func (u *udQP) RecvReady() {}

// Errored implements soft.Endpoint. The sender completes the WQE it holds
// and takes no more; soft flushes the rest.
func (u *udQP) Errored() { u.errored.Store(true) }

// Disconnect implements soft.Endpoint: a UD QP has no peer to tell.
func (u *udQP) Disconnect() {}

// Detach implements soft.Endpoint: the turn no longer delivers to the QP
// and the sender has let go when it returns.
func (u *udQP) Detach() {
	u.detached.Store(true)
	u.sendMu.Lock()
	u.sendMu.Unlock() //nolint:staticcheck // waits out a sender in progress
	e := u.e
	e.mu.Lock()
	if e.uds[u.qpn] == u {
		delete(e.uds, u.qpn)
	}
	e.mu.Unlock()
	e.kick()
}

// Counters implements provider.CounterSource.
func (u *udQP) Counters() []provider.Counter { return u.ctr.listQP() }

// input places one datagram for the QP.
// Precondition: e.mu is held.
func (u *udQP) input(src netip.AddrPort, p *ib.UDPacket, udpLen int) {
	drop := func(k counter) {
		u.ctr.inc(k)
		u.e.dev.inc(k)
	}
	switch {
	case u.detached.Load() || !u.qp.CanReceive():
		drop(ctrDropState)
		return
	case p.DETH.QKey() != u.qp.QKey():
		drop(ctrDropForeign)
		return
	case len(p.Payload) > u.mtu:
		drop(ctrDropMalformed)
		return
	}
	w, _ := u.qp.NextRecv()
	if w == nil {
		drop(ctrDropState) // UD has no RNR: no receive, no datagram
		return
	}
	n := ib.GRHLen + len(p.Payload)
	if uint64(n) > w.Len {
		u.qp.CompleteRecv(w, soft.RecvResult{Status: provider.StatusLocLenErr, Opcode: provider.WCRecv})
		return
	}
	var grh [ib.GRHLen]byte
	ib.PutGRH(grh[:], src.Addr(), u.e.tx.local.Addr(), udpLen, 0, 64)
	soft.Scatter(w.Local, 0, grh[:])
	soft.Scatter(w.Local, ib.GRHLen, p.Payload)
	r := soft.RecvResult{Opcode: provider.WCRecv, ByteLen: uint32(n), Flags: provider.WCWithGRH, SrcQP: p.DETH.SrcQP()}
	if p.ImmDt != nil {
		r.Imm, r.Flags = p.ImmDt.Imm(), r.Flags|provider.WCWithImm
	}
	if p.BTH.SE() {
		r.Flags |= provider.WCSolicited
	}
	u.ctr.inc(ctrRxPackets)
	u.ctr.add(ctrRxBytes, uint64(len(p.Payload)))
	u.qp.CompleteRecv(w, r)
}

// udPacket checks a datagram of the UD service and gives it to its QP:
// QP1 (the GSI, the IB connection manager's) or a UD QP.
// Precondition: e.mu is held.
func (e *engine) udPacket(src netip.AddrPort, data []byte) {
	p, err := ib.ParseUDPacket(data)
	switch {
	case err != nil:
		e.dev.inc(ctrDropMalformed)
		return
	case !e.icrcOK(src, data):
		e.dev.inc(ctrDropICRC)
		return
	case p.BTH.PKey()&0x7FFF != ib.DefaultPKey&0x7FFF:
		e.dev.inc(ctrDropForeign)
		return
	}
	dest := p.BTH.DestQP()
	if dest == ib.GSIQPN {
		if g := e.gsi; g != nil && p.DETH.QKey() == ib.GSIQKey {
			g(src, p.Payload)
			return
		}
		e.dev.inc(ctrDropUnknownQP)
		return
	}
	u := e.uds[dest]
	if u == nil {
		e.dev.inc(ctrDropUnknownQP)
		return
	}
	u.input(src, &p, len(data)+8)
}

// errUDNotConnected explains a UD QP asked to connect.
var errUDNotConnected = fmt.Errorf("%w: a UD QP has no connection: address each SEND with an address handle", provider.ErrInvalidArgument)
