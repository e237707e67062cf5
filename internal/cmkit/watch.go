package cmkit

import (
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/provider"
)

// ErrDialerGone is what Accept or Reject of a request returns when its
// dialer went away before the answer.
var ErrDialerGone = fmt.Errorf("%w: the dialer gave up", provider.ErrTimeout)

// ErrDialerSpoke is what Accept or Reject of a request returns when its
// dialer sent something before the answer, which no CM's dialer may.
var ErrDialerSpoke = fmt.Errorf("%w: the dialer sent data before the answer", provider.ErrProtocol)

// Watch reads the connection of a queued request while the request waits
// for an answer. A dialer sends nothing between its request and the
// answer (an MPA Request and the Reply, a REQ and the REP, a hello and the
// listener's), so any end of that read but the watch's own Stop means the
// dialer is gone (it gave up and closed, or it broke the protocol): the
// watch claims the request, so that Accept skips it and the backlog drops
// it, and closes what the request holds. Without it a listener hands out
// requests whose dialers left long ago, each Accept of them failing only
// once it writes its answer.
//
// The request's Claim decides who ends it, as always. The watch goroutine
// reads the connection and nothing else; it sets left before it claims,
// so a claimant that lost to it can tell why.
type Watch struct {
	conn  net.Conn
	done  chan struct{} // closed when the watch goroutine returned
	left  atomic.Bool   // the dialer went away, or spoke
	spoke bool          // it spoke; written before left is set
}

// WatchDialer starts watching conn for the request whose claim is c; gone
// runs, on the watch's goroutine, if the watch claims the request (it
// closes what the request holds). Start it before the request is queued.
func WatchDialer(conn net.Conn, c *Claim, gone func()) *Watch {
	w := &Watch{conn: conn, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var b [1]byte
		n, err := conn.Read(b[:])
		if ne, ok := err.(net.Error); ok && ne.Timeout() && !c.Pending() {
			return // Stop, after a claim: the request is being answered
		}
		w.spoke = n > 0
		w.left.Store(true)
		if c.Take() {
			gone()
		}
	}()
	return w
}

// Claim takes the request for an Accept or Reject and stops the watch,
// leaving the connection to the caller. It fails with ErrAnswered when
// another answer claimed the request first, and with ErrDialerGone when
// the dialer left (ErrDialerSpoke when it broke the protocol instead); in
// that case after a successful claim (claimed), the caller owns what the
// request holds and must close it. A nil Watch (a request refused before
// it was watched) claims plainly.
func (w *Watch) Claim(c *Claim) (claimed bool, err error) {
	if w == nil { // a request refused before it was watched
		if !c.Take() {
			return false, ErrAnswered
		}
		return true, nil
	}
	if !c.Take() {
		if w.left.Load() {
			return false, w.why()
		}
		return false, ErrAnswered
	}
	w.conn.SetReadDeadline(time.Unix(1, 0))
	<-w.done
	w.conn.SetReadDeadline(time.Time{})
	if w.left.Load() {
		return true, w.why()
	}
	return true, nil
}

// why is the error of a request whose dialer left; left is set.
func (w *Watch) why() error {
	if w.spoke {
		return ErrDialerSpoke
	}
	return ErrDialerGone
}

// Answer is Claim.Answer for a watched request: the same checks, in the
// same order, then Claim.
func (w *Watch) Answer(c *Claim, own bool, pdErr error, connectable func() error) (claimed bool, err error) {
	if err := answerChecks(own, pdErr, connectable); err != nil {
		return false, err
	}
	return w.Claim(c)
}
