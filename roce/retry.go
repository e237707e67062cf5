package roce

import (
	"time"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
)

// Retransmission: go-back-N from the first PSN the responder did not
// take (IBA 9.7.6; rxe_req.c req_retry). Three things start it: a PSN
// sequence error NAK, an implied NAK (a READ's or atomic's answer lost),
// and the local ACK timeout. Each counts against retry_cnt until progress;
// one more is RETRY_EXC_ERR. Unlike rxe, retry_cnt 7 is not infinite: IBA
// gives that meaning to rnr_retry only, and a dead peer must end in an
// error, not a hang.

// retry starts a go-back-N from psn if the retry budget allows, and fails
// the oldest WQE with RETRY_EXC_ERR otherwise.
func (r *requester) retry(psn ib.PSN, now time.Time) {
	if r.retries >= r.retryCnt {
		r.c.ctr.inc(ctrRetryExceeded)
		r.complete(provider.StatusRetryExcErr)
		return
	}
	r.retries++
	r.rewind(psn)
	if r.timeout > 0 {
		r.ackDue = now.Add(r.timeout)
	}
}

// impliedNAK retries from psn unless a go-back-N from there is already
// under way (every later response of a lost READ would trigger one).
func (r *requester) impliedNAK(psn ib.PSN, now time.Time) {
	if r.rewound && r.rewindPSN == psn {
		return
	}
	r.retry(psn, now)
}

// rewind moves the send cursor back to psn: the WQE holding psn resends
// from there (a READ asks for its rest), every later one from its start.
func (r *requester) rewind(psn ib.PSN) {
	for i := 0; i < r.n; i++ {
		w := r.at(i)
		if !w.contains(psn) {
			continue
		}
		w.next = psn.Diff(w.first)
		for j := i + 1; j < r.n; j++ {
			r.at(j).next = 0
		}
		r.cur = i
		r.rewound, r.rewindPSN = true, psn
		r.c.e.activate(r.c)
		return
	}
}

// deadline is the requester's next timer: the RNR wait, or the earlier
// of the ACK timeout and the probe.
func (r *requester) deadline() time.Time {
	if r.rnrWait {
		return r.rnrUntil
	}
	if r.ackDue.IsZero() || !r.probeDue.IsZero() && r.probeDue.Before(r.ackDue) {
		return r.probeDue
	}
	return r.ackDue
}

// onTimer runs a due timer. now is the caller's clock, so that tests can
// drive time.
func (r *requester) onTimer(now time.Time) {
	if r.rnrWait {
		if now.Before(r.rnrUntil) {
			return
		}
		r.rnrWait = false
		r.c.e.activate(r.c) // the cursor already points at the RNR'd packet
		return
	}
	r.probeTimer(now)
	if r.ackDue.IsZero() || now.Before(r.ackDue) {
		return
	}
	r.ackDue = time.Time{}
	if !r.outstanding() {
		return
	}
	r.c.ctr.inc(ctrTimeouts)
	r.rewound = false
	r.retry(r.una, now)
}

// flush completes every WQE the requester holds with WR_FLUSH_ERR: the QP
// entered ERR (the soft device already completed the one that failed).
func (r *requester) flush() {
	for r.n > 0 {
		r.complete(provider.StatusWRFlushErr)
	}
	r.rnrWait, r.ackDue, r.moreToTake = false, time.Time{}, false
	r.owed, r.probeDue, r.probing = false, time.Time{}, false
}
