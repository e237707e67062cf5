package roce

import (
	"time"
)

// When the requester asks for ACKs.
//
// rxe sets AckReq on the last packet of every message and on the packet
// that finds RXE_MAX_PKT_PER_ACK packets unacknowledged (init_req_packet);
// its responder acknowledges only those packets. An ACK costs the peer a
// packet and this side a wake-up, and in a ping-pong of small WRITEs the
// ACKs made up a third of the latency. So, like the iWARP transport's
// probes, an ACK is asked for at once only where someone waits for it:
//
//   - on the last packet of a signalled WQE, and of every READ, atomic,
//     FLUSH and ATOMIC WRITE (whose answers are the ACK);
//   - on every AckEvery-th packet, as rxe;
//   - when a quarter of the send queue waits for ACKs, so that slots free;
//   - on every packet sent again (go-back-N), so that recovery is prompt.
//
// The last packet of an unsignalled SEND or WRITE goes without. Its ACK
// comes with the next one asked for; if the requester goes idle first, it
// sends that packet once more, with AckReq, after probeDelay (the responder
// acknowledges a duplicate at once: IBA 9.7.5.1.1, rxe duplicate_request).
// Completion semantics do not change: nobody waits on an unsignalled WQE,
// and a signalled one implies the earlier ones completed. Errors are not
// delayed either: a NAK is sent whatever AckReq says.

// probeDelay is how long the last unacknowledged packet of an idle
// requester waits before it asks for its ACK.
const probeDelay = time.Millisecond

// ackReq decides the AckReq bit of packet k of w and keeps track of what
// is owed.
func (r *requester) ackReq(w *reqWQE, k int) bool {
	last := k >= w.npkts-1
	ask := r.forceAck || r.noAck >= r.ackEvery || k < w.sent ||
		last && (w.kind != kindAcked || w.w.Signaled() || r.n >= max(len(r.q)/4, 1))
	if ask {
		r.noAck, r.owed = 0, false
		return true
	}
	r.noAck++
	if last {
		r.owed, r.owedPSN = true, w.first.Add(k)
	}
	return false
}

// idle is called when the requester has nothing more to send: an ACK that
// is owed is probed for probeDelay after the requester last went idle.
// Moving the deadline later costs no timer reset (engine.arm is lazy).
func (r *requester) idle(now time.Time) {
	if r.owed {
		r.probeDue = now.Add(probeDelay)
	}
}

// probeTimer runs when the probe timer is due.
func (r *requester) probeTimer(now time.Time) {
	if r.probeDue.IsZero() || now.Before(r.probeDue) {
		return
	}
	r.probeDue = time.Time{}
	if r.owed && r.owedPSN.Diff(r.una) >= 0 {
		r.probing = true
		r.c.e.activate(r.c)
	}
}

// probe sends the owed packet again, asking for its ACK.
func (r *requester) probe(tx *txBatch, now time.Time) {
	r.probing = false
	for i := 0; i < r.n; i++ {
		w := r.at(i)
		if !w.contains(r.owedPSN) {
			continue
		}
		next := w.next
		w.next = r.owedPSN.Diff(w.first)
		r.forceAck = true
		r.emit(tx, w, now)
		r.forceAck = false
		w.next = max(next, w.next)
		r.c.ctr.inc(ctrAckProbes)
		return
	}
	r.owed = false
}

// acked clears what an ACK up to una covers.
func (r *requester) acked() {
	if r.owed && r.owedPSN.Less(r.una) {
		r.owed, r.probeDue = false, time.Time{}
	}
}
