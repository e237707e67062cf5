//go:build cgo && libfabric

package fabric

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// Provider opens devices of one libfabric provider. It implements
// provider.Provider: hand it to verbs.Open.
type Provider struct {
	spec Spec
}

// New parses a device spec ("tcp", "fabric:sockets", "verbs?domain=mlx5_0",
// see Spec) and checks that libfabric offers the provider with connected
// endpoints. Errors wrap provider.ErrNotSupported when it does not.
func New(spec string) (*Provider, error) {
	s, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	return NewSpec(s)
}

// NewSpec is New for a parsed Spec.
func NewSpec(s Spec) (*Provider, error) {
	if s.Provider == "" {
		return nil, fmt.Errorf("%w: empty provider name", provider.ErrInvalidArgument)
	}
	info, _, err := getInfo(s)
	if err != nil {
		return nil, err
	}
	_C_freeinfo(info)
	return &Provider{spec: s}, nil
}

// Spec returns the provider's spec.
func (p *Provider) Spec() Spec { return p.spec }

// Describe opens a device, reads its capabilities and how it maps verbs
// onto the provider (Device.Info), and closes it: what `goverbs info`
// shows for a spec.
func (p *Provider) Describe() (DeviceInfo, provider.Caps, error) {
	d, err := openDevice(p.spec)
	if err != nil {
		return DeviceInfo{}, provider.Caps{}, err
	}
	defer d.Close()
	return d.Info(), d.Caps(), nil
}

// Open opens a device: a fabric, an event queue for connection events and
// the goroutines that progress them. Each protection domain gets its own
// libfabric domain.
func (p *Provider) Open() (provider.Device, error) { return openDevice(p.spec) }

// Device is an open libfabric device. It implements provider.Device.
//
// Locks: the fields up to keys are set by openDevice and read-only after.
// mu guards the sets of PDs, CQs, listeners and QPs and closed; it is a
// leaf, taken from application goroutines and the completion loop
// (cqList). eqMu guards eqTargets and orders closing an endpoint against
// the event loop's lookup (see progress.eqLoop); it is held only around
// fi_eq_read and fi_close, and taken after a Listener's mu. keys and qps
// have locks of their own (leaves); events is devcore.Events (a leaf).
type Device struct {
	spec                       Spec
	info                       hInfo // base fi_info; freed at Close
	attrs                      infoAttrs
	provName, fabName, domName string
	fabric                     hFabric
	eq                         hEQ
	caps                       provider.Caps
	feat                       features
	cmData                     int // the provider's connection data limit

	keys keyTable
	qps  qpTable

	mu        sync.Mutex // guards the sets and closed
	closed    bool
	pds       map[*PD]struct{}
	cqs       map[*CQ]struct{}
	listeners map[*Listener]struct{}
	allQPs    map[*QP]struct{}

	// eqTargets routes connection events by the fid they name.
	eqMu      sync.Mutex
	eqTargets map[uint64]eqTarget

	prog *progress

	quirks quirks

	events devcore.Events
}

// quirks are provider bugs the device works around.
type quirks struct {
	// noShutdown: never call fi_shutdown. libfabric 1.17's sockets
	// provider closes the connection's socket in fi_shutdown and again
	// when its connection thread retires the connection, so the second
	// close can hit a descriptor number reused meanwhile by anything in
	// the process. Without it, a QP leaving RTS does not tell its peer.
	noShutdown bool
	// noAtomics: refuse the provider's atomics. libfabric 1.17's verbs
	// provider (verbs_atomic.c) posts a compare-and-swap with the compare
	// buffer's address as the compare value and the destination fi_addr_t
	// (0 on a connected endpoint) as the swap value, and a fetch-and-add
	// with that fi_addr_t as the addend: on rxe a CSWAP of 100 to 42 leaves
	// 100, a FETCH_ADD of 3 adds nothing. Its FI_ATOMIC_WRITE is a plain
	// RDMA WRITE, so a region without the write right takes none.
	noAtomics bool
}

// eqTarget receives the connection events of one endpoint.
type eqTarget interface {
	eqEvent(ev *eqEvent)
}

func openDevice(s Spec) (_ *Device, err error) {
	info, atomics, err := getInfo(s)
	if err != nil {
		return nil, err
	}
	d := &Device{
		spec: s, info: info,
		pds: map[*PD]struct{}{}, cqs: map[*CQ]struct{}{}, listeners: map[*Listener]struct{}{},
		allQPs: map[*QP]struct{}{}, eqTargets: map[uint64]eqTarget{},
	}
	d.events.Init(256, "github.com/goverbs/goverbs/fabric")
	d.keys.init()
	defer func() {
		if err != nil {
			d.release()
		}
	}()
	d.attrs, d.provName, d.fabName, d.domName = _C_info_attrs(info)
	d.quirks.noShutdown = coreProvider(d.provName) == "sockets"
	d.quirks.noAtomics = coreProvider(d.provName) == "verbs"
	if d.fabric, err = _C_fabric(info); err != nil {
		return nil, opErr("fi_fabric", err)
	}
	if d.eq, err = _C_eq_open(d.fabric, 1024); err != nil {
		return nil, opErr("fi_eq_open", err)
	}
	caps := hintCaps
	if atomics {
		caps |= fiAtomic
	}
	if s.Completion != CompletionTransmit && deliveryOffered(s, caps) {
		d.feat.complFlags = fiDeliveryComp
	}
	if err := d.probe(); err != nil {
		return nil, err
	}
	d.caps = d.buildCaps()
	d.prog = startProgress(d)
	return d, nil
}

// Caps implements provider.Device.
func (d *Device) Caps() provider.Caps { return d.caps }

// Events implements provider.Device.
func (d *Device) Events() <-chan provider.AsyncEvent { return d.events.Chan() }

// event delivers an asynchronous event without blocking.
func (d *Device) event(ev provider.AsyncEvent) { d.events.Send(ev) }

// Close implements provider.Device: every QP moves to ERR and is closed,
// listeners stop, regions are deregistered, then the libfabric objects go.
func (d *Device) Close() error {
	d.mu.Lock()
	err := devcore.CloseOnce(&d.closed)
	qps := slices.Collect(maps.Keys(d.allQPs))
	lns := slices.Collect(maps.Keys(d.listeners))
	d.mu.Unlock()
	if err != nil {
		return err
	}
	for _, qp := range qps {
		qp.Close()
	}
	for _, l := range lns {
		l.Close()
	}
	for _, m := range d.keys.liveMRs() {
		m.Deregister()
	}
	d.prog.stop()
	d.mu.Lock()
	cqs, pds := slices.Collect(maps.Keys(d.cqs)), slices.Collect(maps.Keys(d.pds))
	d.mu.Unlock()
	for _, cq := range cqs {
		cq.release()
	}
	for _, pd := range pds {
		pd.release()
	}
	d.release()
	d.events.Close()
	return nil
}

// release frees the device's own libfabric objects.
func (d *Device) release() {
	_C_close(d.eq)
	_C_close(d.fabric)
	_C_freeinfo(d.info)
	d.eq, d.fabric, d.info = 0, 0, 0
}

// isClosed reports whether Close has begun.
func (d *Device) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// route registers t for the connection events of fid; closeFid removes it.
func (d *Device) route(fid uint64, t eqTarget) {
	d.eqMu.Lock()
	d.eqTargets[fid] = t
	d.eqMu.Unlock()
}

// closeFid stops routing the events of a libfabric object and closes it,
// under eqMu (see progress.eqLoop).
func (d *Device) closeFid(h uintptr) error {
	d.eqMu.Lock()
	defer d.eqMu.Unlock()
	delete(d.eqTargets, uint64(h))
	return _C_close(h)
}

// dispatchEQ hands an event to t, the object it names. A connection
// request nobody listens for any more is freed.
func (d *Device) dispatchEQ(t eqTarget, ev *eqEvent) {
	if ev.event == fiNotify {
		return
	}
	if t == nil {
		if ev.info != 0 {
			_C_freeinfo(hInfo(ev.info))
		}
		return
	}
	t.eqEvent(ev)
}

// roomLocked is the check before d makes one more object of a kind it
// holds n of, at most limit: d is open and below the limit.
// Precondition: d.mu is held.
func (d *Device) roomLocked(n int, limit uint32, what string) error {
	switch {
	case d.closed:
		return provider.ErrClosed
	case n >= int(limit):
		return fmt.Errorf("%w: %s (at most %d)", provider.ErrLimit, what, limit)
	}
	return nil
}

// closeTracked is the Close of obj, an object in one of d's sets
// (guarded by d.mu): it takes obj out of the set and releases its
// libfabric objects, or fails with ErrClosed when obj was not there:
// closed already.
func closeTracked[K interface {
	comparable
	release()
}](d *Device, set map[K]struct{}, obj K) error {
	d.mu.Lock()
	_, ok := set[obj]
	delete(set, obj)
	d.mu.Unlock()
	if !ok {
		return provider.ErrClosed
	}
	obj.release()
	return nil
}
