// Package endpoint is the small toolkit the interop programs share: one
// reliable-connected QP with its protection domain and completion queue,
// and blocking helpers that wait for particular completions, the way the
// C tools they imitate loop over ibv_poll_cq.
package endpoint

import (
	"context"
	"errors"
	"fmt"

	"github.com/goverbs/goverbs/verbs"
)

// Endpoint is one QP with its own PD and CQ (send and receive share it).
type Endpoint struct {
	Dev *verbs.Device
	PD  *verbs.PD
	CQ  *verbs.CQ
	QP  *verbs.QP
	// Spin makes waits poll the CQ without parking (latency tests); the
	// default parks in CQ.Wait between polls.
	Spin bool

	stash []verbs.WorkCompletion // completions polled but not yet claimed
	buf   [16]verbs.WorkCompletion
	mrs   []*verbs.MR
}

// Config sizes an endpoint.
type Config struct {
	Type      verbs.QPType // RC (the zero value) or UD
	Cap       verbs.QPCap
	CQEntries int
	Spin      bool
}

// New creates the PD, CQ and QP of an endpoint on dev.
func New(dev *verbs.Device, c Config) (*Endpoint, error) {
	e := &Endpoint{Dev: dev, Spin: c.Spin}
	var err error
	if e.PD, err = dev.AllocPD(); err != nil {
		return nil, err
	}
	if e.CQ, err = dev.CreateCQ(c.CQEntries); err != nil {
		e.Close()
		return nil, err
	}
	e.QP, err = e.PD.CreateQP(verbs.QPInitAttr{Type: c.Type, SendCQ: e.CQ, RecvCQ: e.CQ, Cap: c.Cap})
	if err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Register registers a fresh buffer of n bytes with the given rights; the
// endpoint deregisters it on Close.
func (e *Endpoint) Register(n int, access verbs.Access) (*verbs.MR, error) {
	mr, err := e.PD.RegisterMR(make([]byte, n), access)
	if err != nil {
		return nil, err
	}
	e.mrs = append(e.mrs, mr)
	return mr, nil
}

// ToInit moves the QP from RESET to INIT with the given remote rights, so
// receives can be posted before the connection exists (a peer may send as
// soon as it is established).
func (e *Endpoint) ToInit(access verbs.Access) error {
	return e.QP.Modify(&verbs.QPAttr{State: verbs.StateInit, Access: access}, verbs.AttrState|verbs.AttrAccessFlags)
}

// Close destroys the QP (the peer sees the connection end), the regions,
// the CQ and the PD. It is safe on a partly built endpoint.
func (e *Endpoint) Close() error {
	var errs []error
	keep := func(err error) {
		if err != nil && !errors.Is(err, verbs.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if e.QP != nil {
		keep(e.QP.Close())
	}
	for _, mr := range e.mrs {
		keep(mr.Deregister())
	}
	e.mrs = nil
	if e.CQ != nil {
		keep(e.CQ.Close())
	}
	if e.PD != nil {
		keep(e.PD.Close())
	}
	return errors.Join(errs...)
}

// Next returns the next completion, waiting for it. A failed completion is
// returned as an error (a *verbs.CompletionError).
func (e *Endpoint) Next(ctx context.Context) (verbs.WorkCompletion, error) {
	return e.Await(ctx, func(*verbs.WorkCompletion) bool { return true })
}

// Await waits for the first completion that match accepts, keeping the
// others for later calls in their order, and returns it with its error if
// it failed. Another WR's failure ends the wait too (the QP is then in
// ERR), except a flush: a peer that disconnects right after its last
// message flushes the receive re-posted for the next one, and that flush
// may be polled before the completion awaited (the SEND answering that
// message), which has not failed. The awaited WR completes in any case,
// flushed at worst, so the wait ends.
func (e *Endpoint) Await(ctx context.Context, match func(*verbs.WorkCompletion) bool) (verbs.WorkCompletion, error) {
	for {
		for i := range e.stash {
			wc := e.stash[i]
			if match(&wc) {
				e.stash = append(e.stash[:i], e.stash[i+1:]...)
				return wc, wc.Err()
			}
		}
		for i := range e.stash {
			if wc := e.stash[i]; wc.Status != verbs.StatusSuccess && wc.Status != verbs.StatusWRFlushErr {
				e.stash = append(e.stash[:i], e.stash[i+1:]...)
				return wc, wc.Err()
			}
		}
		if err := e.poll(ctx); err != nil {
			return verbs.WorkCompletion{}, err
		}
	}
}

// poll adds at least one completion to the stash, waiting for it.
func (e *Endpoint) poll(ctx context.Context) error {
	for {
		n, err := e.CQ.Poll(e.buf[:])
		if err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		if n > 0 {
			e.stash = append(e.stash, e.buf[:n]...)
			return nil
		}
		if e.Spin {
			if err := ctx.Err(); err != nil {
				return err
			}
			continue
		}
		if err := e.CQ.Wait(ctx); err != nil {
			return err
		}
	}
}

// ByID matches the completion of the work request id.
func ByID(id uint64) func(*verbs.WorkCompletion) bool {
	return func(wc *verbs.WorkCompletion) bool { return wc.ID == id }
}

// Recv matches any receive completion.
func Recv(wc *verbs.WorkCompletion) bool { return wc.Opcode.IsRecv() }
