package conformance

import (
	"context"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// HookPeer wraps p so that hook runs before and after every call: the
// parent's side of WithCallHook.
func HookPeer(p Peer, hook func()) Peer { return hookPeer{p, hook} }

type hookPeer struct {
	p    Peer
	hook func()
}

func (h hookPeer) around() func() {
	h.hook()
	return h.hook
}

func (h hookPeer) Caps() verbs.Caps { defer h.around()(); return h.p.Caps() }

func (h hookPeer) Listen() (string, error) { defer h.around()(); return h.p.Listen() }

func (h hookPeer) Accept(ctx context.Context, cfg QPConfig, reply Reply) (Accepted, error) {
	defer h.around()()
	return h.p.Accept(ctx, cfg, reply)
}

func (h hookPeer) RegMR(spec MRSpec) (MRInfo, error) { defer h.around()(); return h.p.RegMR(spec) }
func (h hookPeer) DeregMR(mr int) error              { defer h.around()(); return h.p.DeregMR(mr) }

func (h hookPeer) WriteMem(mr, off int, b []byte) error {
	defer h.around()()
	return h.p.WriteMem(mr, off, b)
}

func (h hookPeer) ReadMem(mr, off, n int) ([]byte, error) {
	defer h.around()()
	return h.p.ReadMem(mr, off, n)
}

func (h hookPeer) PostRecv(qp int, wrs []verbs.RecvWR) error {
	defer h.around()()
	return h.p.PostRecv(qp, wrs)
}

func (h hookPeer) PostSend(qp int, wrs []verbs.SendWR) error {
	defer h.around()()
	return h.p.PostSend(qp, wrs)
}

func (h hookPeer) Poll(qp, n int, timeout time.Duration) ([]verbs.WorkCompletion, error) {
	defer h.around()()
	return h.p.Poll(qp, n, timeout)
}

func (h hookPeer) PollThenClose(qp, n int, timeout time.Duration) ([]verbs.WorkCompletion, error) {
	defer h.around()()
	return h.p.PollThenClose(qp, n, timeout)
}

func (h hookPeer) Query(qp int) (verbs.QPAttr, error) { defer h.around()(); return h.p.Query(qp) }

func (h hookPeer) Modify(qp int, attr verbs.QPAttr, mask verbs.AttrMask) error {
	defer h.around()()
	return h.p.Modify(qp, attr, mask)
}

func (h hookPeer) Disconnect(qp int) error { defer h.around()(); return h.p.Disconnect(qp) }
func (h hookPeer) CloseQP(qp int) error    { defer h.around()(); return h.p.CloseQP(qp) }
func (h hookPeer) Kill() error             { defer h.around()(); return h.p.Kill() }
func (h hookPeer) Close() error            { defer h.around()(); return h.p.Close() }
