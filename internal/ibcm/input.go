package ibcm

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/goverbs/goverbs/internal/wire/ib"
)

// Input handles one MAD that reached the GSI from src. Whatever it holds,
// it changes at most the connection it names and the counters: a MAD that
// does not parse, of another class, of an attribute the CM does not serve,
// or for no connection of ours is dropped and counted; a REP or RTU for a
// REQ never sent is answered with REJ "invalid communication ID", as the
// kernel's CM does.
func (a *Agent) Input(src netip.AddrPort, b []byte, now time.Time) {
	a.ctr.Rx++
	m, err := ib.ParseMAD(b)
	switch {
	case err != nil:
		a.ctr.DropMalformed++
		return
	case m.MgmtClass() != ib.MgmtClassCM || m.ClassVersion() != ib.CMClassVersion:
		a.ctr.DropClass++
		return
	case m.Method() != ib.MADMethodSend:
		a.ctr.DropUnknownAttr++
		return
	}
	switch m.AttrID() {
	case ib.AttrCMReq:
		a.onREQ(src, m, now)
	case ib.AttrCMMRA:
		r := ib.DecodeCMMRA(m)
		c := a.find(src, r.RemoteCommID)
		if c == nil {
			return
		}
		if c.state != StateREQSent || r.MessageMRAed != ib.CMMsgREQ {
			a.ctr.DropWrongState++
			return
		}
		c.state = StateMRARcvd
		a.setDue(c, now.Add(Timeout(r.ServiceTimeout)+c.timeout))
	case ib.AttrCMRej:
		a.onREJ(src, m)
	case ib.AttrCMRep:
		a.onREP(src, m, now)
	case ib.AttrCMRTU:
		r := ib.DecodeCMPair(m, false)
		c := a.find(src, r.RemoteCommID)
		if c == nil {
			a.ctr.RejInvalidCommID++
			a.sendRej(src, m.TID(), 0, r.LocalCommID, ib.CMMsgOther, ib.RejInvalidCommID, nil)
			return
		}
		switch {
		case c.state == StateEstablished && !c.active:
			a.ctr.Duplicates++
		case c.state != StateREPSent || c.RemoteID != r.LocalCommID:
			a.ctr.DropWrongState++
		default:
			c.state = StateEstablished
			a.setDue(c, time.Time{})
			a.pending--
			a.ctr.Established++
			a.event(c, Event{Type: EventEstablished})
		}
	case ib.AttrCMDReq:
		r := ib.DecodeCMPair(m, true)
		c := a.find(src, r.RemoteCommID)
		if c == nil {
			return
		}
		switch c.state {
		case StateEstablished, StateDREQSent, StateTimeWait:
		case StateREPSent: // the RTU was lost; the DREQ proves the peer was connected
		default:
			a.ctr.DropWrongState++
			return
		}
		dup := c.state == StateTimeWait
		p := ib.CMPair{LocalCommID: c.LocalID, RemoteCommID: c.RemoteID}
		p.Encode(c.msg(ib.AttrCMDRep, m.TID()), false)
		c.send()
		if dup {
			a.ctr.Duplicates++
			return
		}
		a.ctr.Disconnections++
		a.disconnected(c, now)
	case ib.AttrCMDRep:
		r := ib.DecodeCMPair(m, false)
		c := a.find(src, r.RemoteCommID)
		if c == nil {
			return
		}
		if c.state != StateDREQSent {
			a.ctr.DropWrongState++
			return
		}
		a.ctr.Disconnections++
		a.disconnected(c, now)
	default:
		a.ctr.DropUnknownAttr++
	}
}

// find returns our connection with local comm ID id that src may speak
// for, counting a miss.
func (a *Agent) find(src netip.AddrPort, id uint32) *Conn {
	c := a.conns[id]
	if c == nil || c.Peer.Addr() != src.Addr() {
		a.ctr.DropUnknownConn++
		return nil
	}
	return c
}

func (a *Agent) onREQ(src netip.AddrPort, m ib.MAD, now time.Time) {
	req := ib.DecodeCMReq(m)
	k := remoteKey{src.Addr(), req.LocalCommID, req.LocalCAGUID}
	if c := a.remote[k]; c != nil {
		// A duplicate: the REP again if we sent one, or the MRA while
		// the application still decides.
		a.ctr.Duplicates++
		if (c.state == StateREPSent || c.state == StateREQRcvd) && c.lastSet {
			c.send()
		}
		return
	}
	switch {
	case req.TransportType != ib.CMTransportRC:
		a.sendRej(src, m.TID(), 0, req.LocalCommID, ib.CMMsgREQ, ib.RejInvalidTransport, nil)
		return
	case a.cfg.Accepts == nil || !a.cfg.Accepts(req.ServiceID):
		a.ctr.RejInvalidServiceID++
		a.sendRej(src, m.TID(), 0, req.LocalCommID, ib.CMMsgREQ, ib.RejInvalidServiceID, nil)
		return
	case a.pending >= a.cfg.MaxPending:
		a.ctr.RejNoResources++
		a.sendRej(src, m.TID(), 0, req.LocalCommID, ib.CMMsgREQ, ib.RejNoResources, nil)
		return
	}
	c := &Conn{a: a, Peer: src, LocalID: a.newID(), RemoteID: req.LocalCommID, RemoteGUID: req.LocalCAGUID,
		tid: m.TID(), Req: req, state: StateREQRcvd}
	a.conns[c.LocalID] = c
	a.remote[k] = c
	a.pending++
	a.event(c, Event{Type: EventREQ, REQ: &c.Req})
	if c.state == StateREQRcvd {
		// The owner answers later, within the MRA's service timeout
		// (sendMRA arms it); an answer in OnEvent armed its own.
		c.sendMRA(now)
	}
}

func (a *Agent) onREP(src netip.AddrPort, m ib.MAD, now time.Time) {
	rep := ib.DecodeCMRep(m)
	c := a.conns[rep.RemoteCommID]
	if c == nil || !c.active || c.Peer.Addr() != src.Addr() {
		a.ctr.RejInvalidCommID++
		a.sendRej(src, m.TID(), 0, rep.LocalCommID, ib.CMMsgREP, ib.RejInvalidCommID, nil)
		return
	}
	switch c.state {
	case StateREQSent, StateMRARcvd:
	case StateREPRcvd: // the owner is still readying its QP
		a.ctr.Duplicates++
		return
	case StateEstablished:
		if rep.LocalCommID == c.RemoteID { // our RTU was lost
			a.ctr.Duplicates++
			c.resendRTU()
			return
		}
		a.ctr.DropWrongState++
		return
	default:
		a.ctr.DropWrongState++
		return
	}
	c.RemoteID, c.RemoteGUID, c.Rep = rep.LocalCommID, rep.LocalCAGUID, rep
	if a.cfg.DeferRTU {
		// The owner confirms within what the peer waits for an RTU.
		c.state = StateREPRcvd
		a.setDue(c, now.Add(Timeout(c.Req.RemoteCMResponseTimeout)*time.Duration(int(c.Req.MaxCMRetries)+1)))
		a.event(c, Event{Type: EventREP, REP: &c.Rep})
		return
	}
	a.event(c, Event{Type: EventREP, REP: &c.Rep})
	if c.state == StateClosed { // OnEvent rejected
		return
	}
	c.state = StateEstablished
	a.setDue(c, time.Time{})
	a.ctr.Established++
	c.resendRTU()
}

func (c *Conn) resendRTU() {
	p := ib.CMPair{LocalCommID: c.LocalID, RemoteCommID: c.RemoteID}
	p.Encode(c.msg(ib.AttrCMRTU, c.tid), false)
	c.send()
}

func (a *Agent) onREJ(src netip.AddrPort, m ib.MAD) {
	r := ib.DecodeCMRej(m)
	c := a.conns[r.RemoteCommID]
	if c == nil && r.Reason == ib.RejTimeout && r.RejectedInfoLen >= 8 {
		// A dialer that gave up before our REP knows no comm ID of ours:
		// its REJ names its own and, in the ARI, its CA GUID, the key
		// its REQ was taken under.
		c = a.remote[remoteKey{src.Addr(), r.LocalCommID, binary.BigEndian.Uint64(r.ARI[:])}]
	}
	if c == nil && r.MessageRejected == ib.CMMsgREQ {
		// A REJ of a REQ may not name our comm ID; the TID does.
		for _, x := range a.conns {
			if x.active && x.tid == m.TID() && x.state <= StateMRARcvd {
				c = x
				break
			}
		}
	}
	if c == nil || c.Peer.Addr() != src.Addr() {
		a.ctr.DropUnknownConn++
		return
	}
	switch c.state {
	case StateREQSent, StateMRARcvd, StateREPRcvd, StateREQRcvd, StateREPSent, StateEstablished:
	default:
		a.ctr.DropWrongState++
		return
	}
	a.ctr.RejRcvd++
	a.close(c)
	a.event(c, Event{Type: EventRejected, Rej: &r})
}
