// Package ibcm is the InfiniBand connection manager (IBA Vol 1 chapter 12)
// as a wire format and state machine: REQ, MRA, REJ, REP, RTU, DREQ and
// DREP in 256-byte MADs of management class 0x07 (codecs in
// internal/wire/ib), the active and passive connection state machines
// with response timeouts, retries, duplicate detection, transaction IDs
// and time-wait, and rdma_cm's CMA header and TCP port space service IDs
// (cma.go). It does no I/O: the transport hands it each MAD that reached
// its GSI (QP1) with Input, calls Tick when Next says, and sends what the
// Send callback gives it. Every method takes the time; tests drive it.
//
// An Agent is not safe for concurrent use: its owner serializes calls
// (roce calls it with its engine's turn held).
package ibcm

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"net/netip"
	"time"

	"github.com/goverbs/goverbs/internal/wire/ib"
)

// State is a connection's CM state (IBA Vol 1 §12.9.6, simplified to the
// states a QP-based CM needs).
type State uint8

// Connection states.
const (
	StateIdle        State = iota
	StateREQSent           // active: waiting for REP (or MRA, REJ)
	StateMRARcvd           // active: the passive side asked for more time
	StateREPRcvd           // active (Config.DeferRTU): the REP arrived; the owner has not confirmed
	StateREQRcvd           // passive: the application has not answered
	StateREPSent           // passive: waiting for RTU
	StateEstablished       // both: connected
	StateDREQSent          // waiting for DREP
	StateTimeWait          // disconnected; the comm ID is held a while
	StateClosed            // gone (rejected, timed out, time-wait over)
)

var stateNames = [...]string{"IDLE", "REQ_SENT", "MRA_RCVD", "REP_RCVD", "REQ_RCVD", "REP_SENT", "ESTABLISHED", "DREQ_SENT", "TIMEWAIT", "CLOSED"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(?)"
}

// EventType says what happened to a connection.
type EventType uint8

// Events delivered to Config.OnEvent.
const (
	EventREQ          EventType = iota + 1 // passive: a new request; answer with Accept or Reject
	EventREP                               // active: the REP arrived; the RTU goes after OnEvent returns unless it rejected (or, with Config.DeferRTU, on Confirm)
	EventEstablished                       // passive: the RTU arrived
	EventRejected                          // the peer rejected (Rej holds why)
	EventTimeout                           // the peer never answered
	EventDisconnected                      // a DREQ arrived, or our DREQ was answered or timed out
)

// Event is one connection event.
type Event struct {
	Type EventType
	REQ  *ib.CMReq // EventREQ
	REP  *ib.CMRep // EventREP
	Rej  *ib.CMRej // EventRejected
}

// Counters count what the agent saw and did; hostile input shows here.
type Counters struct {
	Rx, Tx                      uint64
	DropMalformed               uint64 // not a 256-byte MAD of base version 1
	DropClass                   uint64 // another management class or class version
	DropUnknownAttr             uint64 // an attribute the CM does not serve
	DropUnknownConn             uint64 // a message for no connection of ours
	DropWrongState              uint64 // a message the connection's state does not take
	Duplicates                  uint64 // REQ, REP or DREQ seen again (answered again)
	Retransmits                 uint64 // REQ, REP or DREQ resent after a timeout
	Timeouts                    uint64 // connections that ran out of retries
	RejSent, RejRcvd            uint64
	RejInvalidServiceID         uint64 // REQs for no listener
	RejInvalidCommID            uint64 // REP or RTU for a REQ never sent
	RejNoResources              uint64 // REQs beyond MaxPending
	Established, Disconnections uint64
}

// Config sets up an Agent.
type Config struct {
	// Send transmits a MAD to the GSI at dst; the slice is reused after
	// it returns.
	Send func(dst netip.AddrPort, mad []byte)
	// Accepts says whether a listener serves a service ID; a REQ for
	// one that is not served is rejected with reason 8.
	Accepts func(serviceID uint64) bool
	// OnEvent is told of every event; it may call the connection's
	// methods.
	OnEvent func(c *Conn, ev Event)
	// CAGUID is this node's channel adapter GUID.
	CAGUID uint64
	// ResponseTimeout is the CM response timeout exponent (4.096 µs ×
	// 2^t); MaxRetries the resends before giving up. Defaults 18
	// (about 1 s) and 3.
	ResponseTimeout uint8
	MaxRetries      int
	// MRATimeout is the service timeout exponent an MRA gives a dialer
	// while the owner decides on its REQ: how long the REQ may wait for
	// an answer. Default 24 (about 69 s), rdma_cm's CMA_CM_MRA_SETTING.
	MRATimeout uint8
	// TimeWait is how long a disconnected comm ID is held; default 1 s.
	TimeWait time.Duration
	// MaxPending bounds passive connections not yet established;
	// default 256.
	MaxPending int
	// FirstCommID seeds the local comm IDs (any nonzero value).
	FirstCommID uint32
	// DeferRTU holds the RTU after a REP until the owner calls
	// Conn.Confirm (or Reject): a transport that must ready its QP
	// outside the agent's caller, before the peer may send, uses it.
	DeferRTU bool
}

// Conn is one connection's CM state.
type Conn struct {
	a                 *Agent
	state             State
	Peer              netip.AddrPort // the peer's GSI
	LocalID, RemoteID uint32
	RemoteGUID        uint64
	tid               uint64 // the transaction of the message we wait on an answer for
	active            bool
	last              [ib.MADLen]byte // the message resent on timeout or duplicate
	lastSet           bool
	due               time.Time
	heapAt            int // 1 + its index in the agent's due heap; 0: not in it
	retries           int
	timeout           time.Duration
	Req               ib.CMReq // the REQ (sent or received)
	Rep               ib.CMRep // the REP (sent or received)
	Context           any      // the owner's
}

// State returns the connection's state.
func (c *Conn) State() State { return c.state }

// Agent is one node's CM.
type Agent struct {
	cfg     Config
	conns   map[uint32]*Conn    // by local comm ID
	remote  map[remoteKey]*Conn // passive, by the peer's comm ID
	nextID  uint32
	nextTID uint64
	pending int
	// due holds the connections with a deadline (Conn.due), soonest
	// first: the engine asks Next on every turn, and the agent keeps each
	// connection in time-wait for a second, thousands of them at a high
	// setup rate; ready is Tick's scratch list.
	due   dueHeap
	ready []*Conn
	ctr   Counters
	buf   [ib.MADLen]byte
}

type remoteKey struct {
	peer netip.Addr
	id   uint32
	guid uint64
}

// New returns an agent.
func New(cfg Config) *Agent {
	if cfg.ResponseTimeout == 0 {
		cfg.ResponseTimeout = 18
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 3
	}
	if cfg.TimeWait == 0 {
		cfg.TimeWait = time.Second
	}
	if cfg.MRATimeout == 0 {
		cfg.MRATimeout = 24
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = 256
	}
	if cfg.FirstCommID == 0 {
		cfg.FirstCommID = 1
	}
	return &Agent{cfg: cfg, conns: map[uint32]*Conn{}, remote: map[remoteKey]*Conn{},
		nextID: cfg.FirstCommID, nextTID: uint64(cfg.FirstCommID) << 32}
}

// Counters returns a copy of the counters.
func (a *Agent) Counters() Counters { return a.ctr }

// Conns returns how many connections the agent holds (any state).
func (a *Agent) Conns() int { return len(a.conns) }

// Timeout returns the duration of a CM response timeout exponent.
func Timeout(t uint8) time.Duration {
	return time.Duration(4096<<min(t, 31)) * time.Nanosecond
}

func (a *Agent) newID() uint32 {
	for {
		id := a.nextID
		a.nextID++
		if _, used := a.conns[id]; id != 0 && !used {
			return id
		}
	}
}

func (a *Agent) newTID() uint64 { a.nextTID++; return a.nextTID }

// Errors of the connection methods.
var (
	ErrState = errors.New("ibcm: the connection is not in a state for that")
)

// Connect sends a REQ to the GSI at peer. req's LocalCommID, CA GUID and
// timeouts are filled in; the rest (service ID, QPN, PSN, path, private
// data) is the caller's.
func (a *Agent) Connect(peer netip.AddrPort, req ib.CMReq, now time.Time) *Conn {
	c := &Conn{a: a, Peer: peer, LocalID: a.newID(), active: true, tid: a.newTID()}
	req.LocalCommID, req.LocalCAGUID = c.LocalID, a.cfg.CAGUID
	req.LocalCMResponseTimeout, req.RemoteCMResponseTimeout = a.cfg.ResponseTimeout, a.cfg.ResponseTimeout
	req.MaxCMRetries = uint8(min(a.cfg.MaxRetries, 15))
	c.Req = req
	a.conns[c.LocalID] = c
	m := c.msg(ib.AttrCMReq, c.tid)
	req.Encode(m)
	c.state = StateREQSent
	c.arm(now, Timeout(a.cfg.ResponseTimeout))
	c.send()
	return c
}

// msg starts the connection's next message in its resend buffer.
func (c *Conn) msg(attr uint16, tid uint64) ib.MAD {
	m := ib.MAD(c.last[:])
	m.EncodeHeader(&ib.MADFields{MgmtClass: ib.MgmtClassCM, ClassVersion: ib.CMClassVersion,
		Method: ib.MADMethodSend, TID: tid, AttrID: attr})
	c.lastSet = true
	return m
}

func (c *Conn) send() {
	c.a.ctr.Tx++
	c.a.cfg.Send(c.Peer, c.last[:])
}

func (c *Conn) arm(now time.Time, d time.Duration) {
	c.timeout, c.retries = d, 0
	c.a.setDue(c, now.Add(d))
}

// sendMRA tells the dialer that its REQ arrived and waits for the owner
// (IBTA 12.6.6), as rdma_cm's listener does when its user does not answer
// at once: the dialer then waits the MRA's service timeout rather than
// its response timeout and retries, about 4 s by default. The REQ is held
// as long, then timed out with a REJ.
func (c *Conn) sendMRA(now time.Time) {
	t := c.a.cfg.MRATimeout
	mra := ib.CMMRA{LocalCommID: c.LocalID, RemoteCommID: c.RemoteID, MessageMRAed: ib.CMMsgREQ, ServiceTimeout: t}
	mra.Encode(c.msg(ib.AttrCMMRA, c.tid))
	c.a.setDue(c, now.Add(Timeout(t)))
	c.send()
}

// Accept answers a REQ with rep (passive; EventREQ). LocalCommID,
// RemoteCommID and the CA GUID are filled in.
func (c *Conn) Accept(rep ib.CMRep, now time.Time) error {
	if c.state != StateREQRcvd {
		return ErrState
	}
	rep.LocalCommID, rep.RemoteCommID, rep.LocalCAGUID = c.LocalID, c.RemoteID, c.a.cfg.CAGUID
	c.Rep = rep
	rep.Encode(c.msg(ib.AttrCMRep, c.tid))
	c.state = StateREPSent
	c.arm(now, Timeout(c.Req.RemoteCMResponseTimeout))
	c.send()
	return nil
}

// Reject answers a REQ (passive) or a REP (active, from OnEvent) with a
// REJ of the given reason (ib.RejConsumer with private data for an
// application's refusal).
func (c *Conn) Reject(reason uint16, priv []byte) error {
	var what uint8
	switch c.state {
	case StateREQRcvd:
		what = ib.CMMsgREQ
	case StateREPRcvd:
		what = ib.CMMsgREP
	case StateREQSent, StateMRARcvd:
		// The active side gives up before any REP: no message of the
		// peer's is rejected, and the REJ names no comm ID of the peer's
		// (it has none yet); the peer finds its connection by our comm
		// ID and, for a Timeout, the CA GUID in the ARI (as Linux's
		// cm_destroy_id sends and cm_rej_handler looks up).
		what = ib.CMMsgOther
	case StateREPSent: // the passive side gives up waiting for the RTU
		what = ib.CMMsgOther
	default:
		return ErrState
	}
	c.a.sendRej(c.Peer, c.tid, c.LocalID, c.RemoteID, what, reason, priv)
	c.a.close(c)
	return nil
}

// Confirm sends the RTU a REP waits for (Config.DeferRTU) and moves the
// connection to ESTABLISHED.
func (c *Conn) Confirm(now time.Time) error {
	if c.state != StateREPRcvd {
		return ErrState
	}
	c.state = StateEstablished
	c.a.setDue(c, time.Time{})
	c.a.ctr.Established++
	c.resendRTU()
	return nil
}

// Disconnect sends a DREQ (from ESTABLISHED).
func (c *Conn) Disconnect(now time.Time) error {
	if c.state != StateEstablished {
		return ErrState
	}
	c.tid = c.a.newTID()
	p := ib.CMPair{LocalCommID: c.LocalID, RemoteCommID: c.RemoteID, RemoteQPN: c.remoteQPN()}
	p.Encode(c.msg(ib.AttrCMDReq, c.tid), true)
	c.state = StateDREQSent
	c.arm(now, Timeout(c.a.cfg.ResponseTimeout))
	c.send()
	return nil
}

func (c *Conn) remoteQPN() uint32 {
	if c.active {
		return c.Rep.LocalQPN
	}
	return c.Req.LocalQPN
}

func (a *Agent) sendRej(dst netip.AddrPort, tid uint64, local, remote uint32, what uint8, reason uint16, priv []byte) {
	m := ib.MAD(a.buf[:])
	m.EncodeHeader(&ib.MADFields{MgmtClass: ib.MgmtClassCM, ClassVersion: ib.CMClassVersion,
		Method: ib.MADMethodSend, TID: tid, AttrID: ib.AttrCMRej})
	r := ib.CMRej{LocalCommID: local, RemoteCommID: remote, MessageRejected: what, Reason: reason}
	if reason == ib.RejTimeout {
		// IBTA 12.6.7.2: a Timeout REJ's ARI is the sender's CA GUID.
		binary.BigEndian.PutUint64(r.ARI[:], a.cfg.CAGUID)
		r.RejectedInfoLen = 8
	}
	copy(r.PrivateData[:], priv)
	r.Encode(m)
	a.ctr.Tx++
	a.ctr.RejSent++
	a.cfg.Send(dst, a.buf[:])
}

func (a *Agent) close(c *Conn) {
	if !c.active && c.state < StateEstablished {
		a.pending--
	}
	c.state = StateClosed
	a.setDue(c, time.Time{})
	delete(a.conns, c.LocalID)
	if !c.active {
		k := remoteKey{c.Peer.Addr(), c.RemoteID, c.RemoteGUID}
		if a.remote[k] == c {
			delete(a.remote, k)
		}
	}
}

// disconnected moves c to TimeWait, once a DREQ has arrived or ours was
// answered or timed out, and reports EventDisconnected.
func (a *Agent) disconnected(c *Conn, now time.Time) {
	if !c.active && c.state < StateEstablished {
		a.pending--
	}
	c.state = StateTimeWait
	a.setDue(c, now.Add(a.cfg.TimeWait))
	a.event(c, Event{Type: EventDisconnected})
}

// timedOut ends c, whose peer or application never answered, with a REJ
// (Timeout) that names the message left unanswered, and reports
// EventTimeout.
func (a *Agent) timedOut(c *Conn) {
	what := uint8(ib.CMMsgREQ)
	if c.state == StateREPSent || c.state == StateREPRcvd {
		what = ib.CMMsgREP
	}
	a.sendRej(c.Peer, c.tid, c.LocalID, c.RemoteID, what, ib.RejTimeout, nil)
	a.close(c)
	a.event(c, Event{Type: EventTimeout})
}

func (a *Agent) event(c *Conn, ev Event) {
	if a.cfg.OnEvent != nil {
		a.cfg.OnEvent(c, ev)
	}
}

// Next returns when Tick should next run (zero when nothing waits).
func (a *Agent) Next() time.Time {
	if len(a.due) == 0 {
		return time.Time{}
	}
	return a.due[0].due
}

// Tick resends what timed out, gives up on what ran out of retries and
// ends time-waits.
func (a *Agent) Tick(now time.Time) {
	// What is due leaves the heap first, then each is handled. An event
	// handler may re-arm a connection still in ready (it is back in the
	// heap, for a later Tick) or disarm it (a zero due; close disarms
	// too): either way it is no longer this Tick's.
	ready := a.ready[:0]
	for len(a.due) > 0 && !now.Before(a.due[0].due) {
		ready = append(ready, heap.Pop(&a.due).(*Conn))
	}
	a.ready = ready
	defer clear(ready) // hold no connection past the Tick
	for _, c := range ready {
		if c.heapAt != 0 || c.due.IsZero() {
			continue
		}
		switch c.state {
		case StateREQSent, StateMRARcvd, StateREPSent, StateDREQSent:
			if c.retries < a.cfg.MaxRetries {
				c.retries++
				a.setDue(c, now.Add(c.timeout))
				a.ctr.Retransmits++
				c.send()
				continue
			}
			a.ctr.Timeouts++
			if c.state == StateDREQSent {
				a.disconnected(c, now)
				continue
			}
			a.timedOut(c)
		case StateREQRcvd, StateREPRcvd: // the application never answered
			a.ctr.Timeouts++
			a.timedOut(c)
		case StateTimeWait:
			a.close(c)
		default:
			a.setDue(c, time.Time{})
		}
	}
}
