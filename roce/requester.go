package roce

import (
	"time"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// wqeKind says what completes a send WQE on the wire.
type wqeKind uint8

const (
	kindAcked    wqeKind = iota // SEND, WRITE: an ACK covering its last PSN
	kindRead                    // READ: its responses, in order
	kindAtomic                  // CMP_SWAP, FETCH_ADD: its ATOMIC ACKNOWLEDGE
	kindReadResp                // FLUSH, ATOMIC WRITE: a zero-length READ response (rxe send_read_response_ack)
)

// reqWQE is a send WQE the requester took from the soft device, with its
// place in PSN space (IBA 9.7.1: a message of n packets uses n PSNs, a READ
// as many as its responses, at least one).
type reqWQE struct {
	w     *soft.SendWQE
	kind  wqeKind
	first ib.PSN
	npkts int // PSNs it occupies
	next  int // offset of the next packet to send (go-back-N rewinds it)
	sent  int // highest offset ever sent + 1, to count retransmissions
	resp  int // READ: responses placed so far
	rnr   int // RNR NAKs received for it
}

func (w *reqWQE) last() ib.PSN { return w.first.Add(w.npkts - 1) }

// contains reports whether psn falls in w's PSN range.
func (w *reqWQE) contains(psn ib.PSN) bool {
	return psn.Diff(w.first) >= 0 && psn.Diff(w.last()) <= 0
}

// requester is the send half of a QP (IBA 9.7.1-9.7.2; rxe_req.c and
// rxe_comp.c): it segments WQEs into packets, numbers them, keeps up to a
// window of PSNs unacknowledged, and matches responses to WQEs. State is
// guarded by the engine's turn.
//
// Sequence state: nextPSN is the first PSN never assigned; una the oldest
// PSN not yet acknowledged (for a READ, the next response it waits for).
// The WQEs in flight sit in q, oldest first; cur indexes the first one
// with packets still to send.
type requester struct {
	c       *qpConn
	started bool

	mtu      int
	window   int
	ackEvery int
	timeout  time.Duration // local ACK timeout; 0 waits forever
	retryCnt int
	rnrRetry int

	nextPSN ib.PSN
	una     ib.PSN
	q       []reqWQE // ring
	head, n int
	cur     int // offset from head
	noAck   int // packets sent since the last AckReq

	retries    int // retries since the last progress
	rewound    bool
	rewindPSN  ib.PSN    // where the last go-back-N started
	ackDue     time.Time // local ACK timer; zero when stopped
	rnrWait    bool
	rnrPSN     ib.PSN
	rnrUntil   time.Time
	moreToTake bool // NextSend may have WQEs

	owed     bool      // a message's last packet went without AckReq
	owedPSN  ib.PSN    // the latest such packet
	probeDue time.Time // when to ask for the ACK of owedPSN; zero if not due
	probing  bool      // the next transmit sends the probe
	forceAck bool      // the packet being built asks for an ACK
	failed   bool      // a WQE completed with an error: the QP's ERR is ours
}

func (r *requester) init(c *qpConn) {
	r.c = c
	r.window = c.e.cfg.Window
	r.ackEvery = c.e.cfg.AckEvery
}

// ready is SendReady, in a turn: the first time the QP is in
// RTS it takes its send PSN; every time it re-reads the attributes a
// SQD→RTS transition may have changed.
func (r *requester) ready(now time.Time) {
	a := r.c.qp.Attr()
	if a.State != provider.StateRTS && a.State != provider.StateSQD {
		return
	}
	if !r.started {
		r.started = true
		r.nextPSN = ib.PSN(a.SQPSN).Mask()
		r.una = r.nextPSN
		r.q = make([]reqWQE, max(a.Cap.MaxSendWR, 1))
		r.mtu = r.c.mtu
	}
	r.timeout = ib.LocalACKTimeout(a.Timeout)
	r.retryCnt, r.rnrRetry = int(a.RetryCnt), int(a.RNRRetry)
	r.moreToTake = true
}

func (r *requester) at(i int) *reqWQE { return &r.q[(r.head+i)%len(r.q)] }

// transmit sends up to quota request packets and reports whether it
// stopped only because of the quota.
func (r *requester) transmit(tx *txBatch, now time.Time, quota int) bool {
	if !r.started || r.rnrWait {
		return false
	}
	if r.probing {
		r.probe(tx, now)
		quota--
	}
	for range quota {
		w := r.cursor()
		if w == nil {
			r.idle(now)
			return false
		}
		if w.first.Add(w.next).Diff(r.una) >= r.window {
			return false // an ACK will reopen the window
		}
		r.emit(tx, w, now)
	}
	return true
}

// cursor returns the WQE with the next packet to send, taking a new one
// from the send queue when every WQE in flight is sent.
func (r *requester) cursor() *reqWQE {
	for ; r.cur < r.n; r.cur++ {
		w := r.at(r.cur)
		r.skipAcked(w)
		if w.next < w.npkts {
			return w
		}
	}
	if !r.moreToTake || r.n == len(r.q) {
		return nil
	}
	sw := r.c.qp.NextSend()
	if sw == nil {
		r.moreToTake = false // SendReady will say when that changes
		return nil
	}
	w := r.at(r.n)
	*w = reqWQE{w: sw, kind: kindOf(sw.WR.Opcode), first: r.nextPSN, npkts: r.psns(sw)}
	r.nextPSN = r.nextPSN.Add(w.npkts)
	r.n++
	return w
}

// skipAcked moves w's cursor past what was acknowledged after a rewind:
// ACKs of packets sent before the rewind may still arrive.
func (r *requester) skipAcked(w *reqWQE) {
	switch w.kind {
	case kindAcked:
		if d := r.una.Diff(w.first); d > w.next && d <= w.npkts {
			w.next = d
		}
	case kindRead:
		w.next = max(w.next, w.resp)
	}
}

func kindOf(op provider.Opcode) wqeKind {
	switch op {
	case provider.OpRead:
		return kindRead
	case provider.OpCompareSwap, provider.OpFetchAdd:
		return kindAtomic
	case provider.OpFlush, provider.OpAtomicWrite:
		return kindReadResp
	}
	return kindAcked
}

// psns is how many PSNs a WQE uses: one per MTU of payload (or of READ
// data), at least one.
func (r *requester) psns(w *soft.SendWQE) int {
	switch w.WR.Opcode {
	case provider.OpSend, provider.OpSendWithImm, provider.OpSendWithInv,
		provider.OpWrite, provider.OpWriteWithImm, provider.OpRead:
		return packets(w.Len, r.mtu)
	}
	return 1
}

// packets is ceil(n/mtu), at least 1.
func packets(n uint64, mtu int) int {
	if n == 0 {
		return 1
	}
	return int((n + uint64(mtu) - 1) / uint64(mtu))
}

// emit sends the packet at w.next and advances the cursor.
func (r *requester) emit(tx *txBatch, w *reqWQE, now time.Time) {
	k := w.next
	if k < w.sent {
		r.c.ctr.inc(ctrRetransmits)
	}
	switch w.kind {
	case kindRead:
		r.emitRead(tx, w, k)
		w.next = w.npkts // one request asks for the rest
	case kindAtomic:
		r.emitAtomic(tx, w)
		w.next = 1
	case kindReadResp:
		r.emitReadResp(tx, w)
		w.next = 1
	default:
		r.emitData(tx, w, k)
		w.next = k + 1
	}
	w.sent = max(w.sent, w.next)
	if r.ackDue.IsZero() && r.timeout > 0 {
		r.ackDue = now.Add(r.timeout)
	}
}
