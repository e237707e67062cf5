//go:build cgo && libfabric

package fabric_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/verbs"
)

// pingPonger is one side of goverbs' counterpart of fi_pingpong: a QP
// with receives of size bytes posted, sending size bytes per turn and
// busy-polling its CQ, as fi_pingpong does. Messages up to the inline
// limit go inline and unsignalled (fi_pingpong injects them); larger ones
// are signalled and both completions are awaited (fi_pingpong waits for
// the transmit completion).
type pingPonger struct {
	dev      *verbs.Device
	pd       *verbs.PD
	cq       *verbs.CQ
	qp       *verbs.QP
	buf      *mem.Region
	mr       *verbs.MR
	size     int
	inline   bool
	send     []verbs.SendWR
	recv     []verbs.RecvWR
	wcs      []verbs.WorkCompletion
	pendSend int
}

const ppDepth = 32

func newPingPonger(d *verbs.Device, size int) (*pingPonger, error) {
	p := &pingPonger{dev: d, size: size, wcs: make([]verbs.WorkCompletion, 16)}
	var err error
	if p.pd, err = d.AllocPD(); err != nil {
		return nil, err
	}
	if p.cq, err = d.CreateCQ(256); err != nil {
		return nil, err
	}
	c := d.Caps()
	p.inline = size <= int(c.MaxInlineData)
	cp := verbs.QPCap{MaxSendWR: ppDepth, MaxRecvWR: ppDepth, MaxSendSGE: 1, MaxRecvSGE: 1}
	if p.inline {
		cp.MaxInlineData = uint32(size)
	}
	if p.qp, err = p.pd.CreateQP(verbs.QPInitAttr{SendCQ: p.cq, RecvCQ: p.cq, Cap: cp}); err != nil {
		return nil, err
	}
	// Off-heap memory, as fi_pingpong's malloc'd buffers: one half
	// sends, the other receives.
	if p.buf, err = mem.Alloc(2 * max(size, 64)); err != nil {
		return nil, err
	}
	if p.mr, err = p.pd.RegisterMemory(p.buf, verbs.AccessLocalWrite); err != nil {
		return nil, err
	}
	flags := verbs.SendSignaled
	if p.inline {
		flags = verbs.SendInline
	}
	p.send = []verbs.SendWR{{Opcode: verbs.OpSend, Flags: flags, SGL: []verbs.SGE{p.mr.SGE(0, size)}}}
	p.recv = []verbs.RecvWR{{SGL: []verbs.SGE{p.mr.SGE(max(size, 64), size)}}}
	return p, nil
}

// postRecvs posts the initial receives (before connecting).
func (p *pingPonger) postRecvs() error {
	if err := p.qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessRemoteWrite}, verbs.AttrState|verbs.AttrAccessFlags); err != nil {
		return err
	}
	for range ppDepth {
		if err := p.qp.PostRecv(p.recv); err != nil {
			return err
		}
	}
	return nil
}

// sendOne posts the next message.
func (p *pingPonger) sendOne() error {
	if !p.inline {
		p.pendSend++
	}
	return p.qp.PostSend(p.send)
}

// awaitRecv spins until a message arrives (and, for signalled sends, its
// own send completed), reposting the receive.
func (p *pingPonger) awaitRecv() error {
	got := false
	for !got || p.pendSend > 0 {
		n, err := p.cq.Poll(p.wcs)
		if err != nil {
			return err
		}
		for i := range n {
			wc := &p.wcs[i]
			if wc.Status != verbs.StatusSuccess {
				return wc.Err()
			}
			if wc.Opcode.IsRecv() {
				got = true
				if err := p.qp.PostRecv(p.recv); err != nil {
					return err
				}
			} else {
				p.pendSend--
			}
		}
	}
	return nil
}

func (p *pingPonger) close() {
	p.qp.Close()
	p.mr.Deregister()
	p.buf.Close()
	p.cq.Close()
	p.pd.Close()
}

// servePingPong is the child process of the ping-pong: it echoes every
// message until the connection ends.
func servePingPong(d *verbs.Device, args []string) error {
	size, _ := strconv.Atoi(args[0])
	p, err := newPingPonger(d, size)
	if err == nil {
		err = p.postRecvs()
	}
	if err != nil {
		return err
	}
	err = listenOnce(d, p.qp, nil, func(addr string) { fmt.Println(addr) })
	for err == nil {
		if err = p.awaitRecv(); err == nil {
			err = p.sendOne()
		}
	}
	return nil // the connection ended: the test is done with us
}

// goPingPong runs iters round trips of size bytes against a child server
// through spec and returns the one-way time per message (fi_pingpong's
// usec/xfer) after a warm-up of iters/10.
func goPingPong(tb testing.TB, spec string, size, iters int) time.Duration {
	tb.Helper()
	srv := startChild(tb, childPingPong, spec, strconv.Itoa(size))
	defer srv.Kill()
	d := must(verbs.Open(openProvider(tb, spec)))(tb)
	defer d.Close()
	p := must(newPingPonger(d, size))(tb)
	defer p.close()
	noErr(tb, p.postRecvs())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	must(d.Dial(ctx, srv.addr, p.qp, verbs.ConnParam{}))(tb)
	warm := iters/10 + 1
	var start time.Time
	for i := range warm + iters {
		if i == warm {
			start = time.Now()
		}
		noErr(tb, p.sendOne())
		noErr(tb, p.awaitRecv())
	}
	return time.Since(start) / time.Duration(2*iters)
}

// TestPingPong checks the ping-pong harness the benchmarks use, briefly,
// over both completion levels.
func TestPingPong(t *testing.T) {
	iters := 200
	if s := os.Getenv("GOVERBS_FABRIC_PP_ITERS"); s != "" {
		iters, _ = strconv.Atoi(s)
	}
	for _, spec := range []string{"tcp?completion=transmit", "tcp"} {
		for _, size := range []int{8, 1 << 20} {
			if size > 8 && iters > 200 {
				continue
			}
			d := goPingPong(t, spec, size, iters)
			t.Logf("%s, %d bytes: %v one way", spec, size, d)
		}
	}
}
