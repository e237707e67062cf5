package soft

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// Config sets a device's name and limits. Zero fields take defaults.
type Config struct {
	Name string
	Caps provider.Caps
}

// defaultCaps are the limits of a soft device before its link adjusts them.
func defaultCaps() provider.Caps {
	return provider.Caps{
		DataPath:        provider.DataPathSoftware,
		MaxMRSize:       1 << 40,
		MaxMR:           1 << 20,
		MaxPD:           1 << 16,
		MaxMW:           1 << 16,
		MaxQP:           1 << 14,
		MaxQPWR:         1 << 14,
		MaxSGE:          32,
		MaxInlineData:   1024,
		MaxCQ:           1 << 14,
		MaxCQE:          1 << 22,
		MaxQPRdAtom:     128,
		MaxQPInitRdAtom: 128,
		MaxSRQ:          1 << 12,
		MaxSRQWR:        1 << 16,
		MaxSRQSGE:       32,
		MaxMsgSize:      1 << 31,
		Opcodes:         provider.AllOpcodes,
		AtomicScope:     provider.AtomicDevice,
		PathMTU:         4096,
	}
}

// Device is a soft RDMA device. It implements provider.Device.
//
// Locks: link, caps and keys are set by NewDevice and read-only after; the
// counters are atomic. mu (a leaf) guards qps, cqs, srqs, srqN and closed, for the
// application's Create/Close calls and the link's QPByNumber. keys and
// events have locks of their own (leaves).
type Device struct {
	link Link
	caps provider.Caps
	keys *keyTable

	nPD, nMR, nMW, nQP, nCQ, nSRQ atomic.Int64

	mu     sync.Mutex
	qps    map[uint32]*QP
	cqs    map[*CQ]struct{}
	srqs   map[*SRQ]struct{}
	srqN   uint32 // the last SRQ number given
	closed bool

	events devcore.Events
}

// NewDevice opens a soft device that moves its work over link.
func NewDevice(link Link, cfg Config) *Device {
	caps := defaultCaps()
	mergeCaps(&caps, cfg.Caps)
	caps.Name = cfg.Name
	link.AdjustCaps(&caps)
	d := &Device{
		link: link,
		caps: caps,
		keys: newKeyTable(),
		qps:  make(map[uint32]*QP),
		cqs:  make(map[*CQ]struct{}),
		srqs: make(map[*SRQ]struct{}),
	}
	d.events.Init(256, "goverbs")
	return d
}

// mergeCaps overrides the limits in c that o sets.
func mergeCaps(c *provider.Caps, o provider.Caps) {
	set32 := func(dst *uint32, v uint32) {
		if v != 0 {
			*dst = v
		}
	}
	set32(&c.MaxMR, o.MaxMR)
	set32(&c.MaxPD, o.MaxPD)
	set32(&c.MaxMW, o.MaxMW)
	set32(&c.MaxQP, o.MaxQP)
	set32(&c.MaxQPWR, o.MaxQPWR)
	set32(&c.MaxSGE, o.MaxSGE)
	set32(&c.MaxInlineData, o.MaxInlineData)
	set32(&c.MaxCQ, o.MaxCQ)
	set32(&c.MaxCQE, o.MaxCQE)
	set32(&c.MaxSRQ, o.MaxSRQ)
	set32(&c.MaxSRQWR, o.MaxSRQWR)
	set32(&c.MaxSRQSGE, o.MaxSRQSGE)
	if o.MaxMRSize != 0 {
		c.MaxMRSize = o.MaxMRSize
	}
	if o.MaxMsgSize != 0 {
		c.MaxMsgSize = o.MaxMsgSize
	}
}

func (d *Device) Caps() provider.Caps { return d.caps }

// Link returns the device's link.
func (d *Device) Link() Link { return d.link }

// count reserves one object against a device limit.
func (d *Device) count(n *atomic.Int64, limit uint32, what string) error {
	if n.Add(1) > int64(limit) {
		n.Add(-1)
		return fmt.Errorf("%w: %s (at most %d)", provider.ErrLimit, what, limit)
	}
	return nil
}

// event delivers an asynchronous event without blocking; when the channel
// is full the event is counted as dropped and the next one says so.
func (d *Device) event(ev provider.AsyncEvent) { d.events.Send(ev) }

func (d *Device) Events() <-chan provider.AsyncEvent { return d.events.Chan() }

// PD is a protection domain of a soft device.
type PD struct {
	dev *Device
}

func (d *Device) AllocPD() (provider.PD, error) {
	if err := d.count(&d.nPD, d.caps.MaxPD, "protection domains"); err != nil {
		return nil, err
	}
	return &PD{dev: d}, nil
}

// Close deallocates the PD; the verbs layer has checked it is unused.
func (p *PD) Close() error {
	p.dev.nPD.Add(-1)
	return nil
}

// QPByNumber returns the device's QP with number qpn.
func (d *Device) QPByNumber(qpn uint32) (*QP, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	qp, ok := d.qps[qpn]
	return qp, ok
}

// Close destroys every QP (flushing its work), closes the link and the
// event channel.
func (d *Device) Close() error {
	d.mu.Lock()
	err := devcore.CloseOnce(&d.closed)
	qps := slices.Collect(maps.Values(d.qps))
	d.mu.Unlock()
	if err != nil {
		return err
	}
	for _, qp := range qps {
		qp.Close()
	}
	// The SRQs' posted receives hold their regions: drop them first.
	d.mu.Lock()
	srqs := slices.Collect(maps.Keys(d.srqs))
	d.mu.Unlock()
	for _, s := range srqs {
		s.Close()
	}
	for _, mr := range d.liveMRs() {
		mr.Deregister()
	}
	err = d.link.Close()
	// The CQs close last, after the QPs flushed into them: a Poll still
	// takes those completions, then ErrClosed; a Wait returns ErrClosed at
	// once, a blocked one included (objects of a closed device return
	// ErrClosed, and nothing waits on them for ever).
	d.mu.Lock()
	cqs := slices.Collect(maps.Keys(d.cqs))
	d.mu.Unlock()
	for _, cq := range cqs {
		cq.closeRing()
	}
	d.events.Close()
	return err
}

// liveMRs returns the regions still registered.
func (d *Device) liveMRs() []*MR {
	d.keys.mu.RLock()
	defer d.keys.mu.RUnlock()
	var mrs []*MR
	for _, ref := range d.keys.keys {
		if ref.local && ref.mr != nil {
			mrs = append(mrs, ref.mr)
		}
	}
	return mrs
}
