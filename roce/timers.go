package roce

import "time"

// The QPs' timers: a min-heap of the QPs that have a deadline, keyed by it,
// so that neither a turn's arm nor its expire looks at QPs that have none
// or whose deadline is not due (issue 17: nothing per packet or per turn in
// O(number of QPs)). A deadline changes only while the turn handles its
// QP: a packet for it, a notification, its transmission, its timer, a
// barrier or a Disconnect. Each of those marks the QP touched, and the
// turn's arm re-keys the touched QPs only, O(log n) each.
//
// A key may be later than the QP's deadline only for the time between a
// touch and the arm of the same turn; it may be earlier, or the deadline
// may have gone, for as long as it likes (a deadline that moves later or
// clears is caught when its key comes due: expire looks at the deadline
// itself and re-keys). So a key is never later than a deadline that a
// runtime timer needs to honour.
//
// All of it is guarded by the turn (e.mu).

// touch marks c for re-keying at this turn's arm.
// Precondition: e.mu is held.
func (e *engine) touch(c *qpConn) {
	if !c.touched {
		c.touched = true
		e.touched = append(e.touched, c)
	}
}

// rekey brings the heap up to date with the touched QPs' deadlines.
// Precondition: e.mu is held.
func (e *engine) rekey() {
	for i, c := range e.touched {
		e.touched[i] = nil
		c.touched = false
		e.timerVisits++
		d := time.Time{}
		if c.attached {
			d = c.deadline()
		}
		e.timers.set(c, d)
	}
	e.touched = e.touched[:0]
}

// timerHeap is a binary min-heap of QPs by timerKey; each QP's timerIdx
// is its index plus one, 0 when it is not in the heap.
type timerHeap []*qpConn

// set gives c the key d, putting it in or taking it out (d zero).
func (h *timerHeap) set(c *qpConn, d time.Time) {
	switch {
	case d.IsZero():
		if c.timerIdx != 0 {
			h.remove(c.timerIdx - 1)
		}
	case c.timerIdx == 0:
		c.timerKey = d
		*h = append(*h, c)
		c.timerIdx = len(*h)
		h.up(len(*h) - 1)
	default:
		old := c.timerKey
		c.timerKey = d
		if d.Before(old) {
			h.up(c.timerIdx - 1)
		} else {
			h.down(c.timerIdx - 1)
		}
	}
}

// min returns the QP with the earliest key, or nil.
func (h timerHeap) min() *qpConn {
	if len(h) == 0 {
		return nil
	}
	return h[0]
}

// remove takes the QP at index i out.
func (h *timerHeap) remove(i int) {
	s := *h
	last := len(s) - 1
	c := s[i]
	if i != last {
		s[i] = s[last]
		s[i].timerIdx = i + 1
	}
	s[last] = nil
	*h = s[:last]
	c.timerIdx, c.timerKey = 0, time.Time{}
	if i != last {
		h.down(i)
		h.up(i)
	}
}

func (h timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].timerKey.Before(h[p].timerKey) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h timerHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].timerKey.Before(h[l].timerKey) {
			m = r
		}
		if !h[m].timerKey.Before(h[i].timerKey) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

func (h timerHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].timerIdx, h[j].timerIdx = i+1, j+1
}
