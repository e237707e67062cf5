package iwarp

import (
	"fmt"
	"sync/atomic"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// New returns a provider whose devices speak iWARP over TCP. Each Open
// makes a device ("iwarp0", "iwarp1", ...) with the options given here.
func New(opts ...Option) provider.Provider {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return providerFunc(func() (provider.Device, error) { return open(cfg) })
}

type providerFunc func() (provider.Device, error)

func (f providerFunc) Open() (provider.Device, error) { return f() }

var devices atomic.Int64

func open(cfg config) (provider.Device, error) {
	name := fmt.Sprintf("iwarp%d", devices.Add(1)-1)
	l := &link{cfg: cfg}
	l.dev = soft.NewDevice(l, soft.Config{Name: name})
	return l.dev, nil
}

// link is one device's attachment to TCP: its listeners and connections.
type link struct {
	cfg config
	dev *soft.Device

	listeners cmkit.CloseSet[*listener]
	eps       cmkit.CloseSet[*endpoint] // the started endpoints
}

// YieldIdlePolls implements soft.PollYielder: an application spinning on
// an empty CQ yields its thread now and then, so that on a machine short of
// CPUs the receive goroutines (and the peer process) that make its
// completions get one.
func (l *link) YieldIdlePolls() bool { return true }

// RNRRule is the receiver-not-ready rule of this transport, as reported in
// Caps.RNRRule.
const RNRRule = "iWARP has no RNR NAK: an untagged message (SEND, SEND_WITH_IMM, or the immediate data of " +
	"WRITE_WITH_IMM) that finds no posted receive waits at the receiver up to the RNR budget " +
	"(iwarp.RNRBudget, default 1s), and the connection's later messages wait behind it; a receive posted " +
	"meanwhile takes it. When the budget runs out, the receiver sends a Terminate (DDP untagged buffer " +
	"error, no buffer available) and its QP moves to ERR (event QPRequestErr, outstanding WRs flushed); " +
	"the sender's WR completes with RNR_RETRY_EXC_ERR and its QP moves to ERR. rnr_retry and " +
	"min_rnr_timer are kept but not used."

func (l *link) AdjustCaps(c *provider.Caps) {
	c.Transport = "iwarp"
	c.AtomicScope = provider.AtomicDevice
	c.WriteCompletion = provider.CompletionPlaced
	if l.cfg.localCompletion {
		c.WriteCompletion = provider.CompletionLocal
	}
	c.Persistence = true
	c.ManualConnect = false
	c.RNRRetry = false
	c.RNRRule = RNRRule
	c.MaxPrivateData = l.maxPrivateData()
	c.MaxMsgSize = 1 << 31
	c.PathMTU = 4096
}

// Connect refuses a QP connected by Modify: an iWARP QP needs its TCP
// connection and MPA exchange, which only Listen and Dial make.
func (l *link) Connect(*soft.QP, *provider.QPAttr) (soft.Endpoint, error) {
	return nil, fmt.Errorf("%w: iWARP QPs connect through Listen and Dial (the connection manager)", provider.ErrNotSupported)
}

// Close closes the device's listeners and whatever connection is left
// (the device closed its QPs, and so their connections, already).
func (l *link) Close() error {
	ls, _ := l.listeners.Close()
	eps, _ := l.eps.Close()
	for _, lis := range ls {
		lis.Close()
	}
	for _, e := range eps {
		e.Detach()
	}
	return nil
}

// refused reports a connection the listening side turned away.
func (l *link) refused(remote string, err error) {
	if f := l.cfg.onRefused; f != nil {
		f(remote, err)
	}
}
