//go:build cgo && rdmacore

package rdmacore

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// Provider opens one verbs device of this host by name (rxe0, siw0, mlx5_0).
type Provider struct {
	name string
}

// New returns the provider of the verbs device name ("rxe0" or
// "verbs:rxe0"). It fails with ErrNotSupported when the host has no such
// device.
func New(name string) (*Provider, error) {
	name = strings.TrimPrefix(name, "verbs:")
	names, _, err := deviceNames()
	if err != nil {
		return nil, fmt.Errorf("%w: ibv_get_device_list: %v", provider.ErrNotSupported, err)
	}
	for _, n := range names {
		if n == name {
			return &Provider{name: name}, nil
		}
	}
	return nil, fmt.Errorf("%w: no verbs device %q on this host (have %q)", provider.ErrNotSupported, name, names)
}

// Open opens the device: a verbs context of its own, with its own
// asynchronous events and connection manager channel.
func (p *Provider) Open() (provider.Device, error) { return openDev(p.name) }

// GID returns port 1's RoCE v2 IPv4 GID and its index: the source GID of
// the device's QPs connected by hand, which a peer's address vector must
// name (perftest's -x). It fails with ErrNotSupported where there is none
// (iWARP, InfiniBand, a RoCE port without an IPv4 address). It only
// queries the device: no probe, no channels.
func (p *Provider) GID() (int, net.IP, error) {
	ctx, err := openDevice(p.name)
	if err != nil {
		return -1, nil, fmt.Errorf("%w: ibv_open_device %s: %v", errnoClass(err), p.name, err)
	}
	defer closeDevice(ctx)
	a, err := queryDevice(ctx)
	if err != nil {
		return -1, nil, fmt.Errorf("%w: ibv_query_device_ex %s: %v", errnoClass(err), p.name, err)
	}
	if a.transport != ibvTransportIWARP && a.link_layer == ibvLinkEthernet {
		if i, gid, _ := roceGID(ctx, int(a.gid_tbl_len)); i >= 0 {
			return i, net.IP(gid[:]), nil
		}
	}
	return -1, nil, fmt.Errorf("%w: %s has no RoCE v2 IPv4 GID on port 1", provider.ErrNotSupported, p.name)
}

// Devices describes every verbs device of this host, for goverbs info.
func Devices() ([]DeviceInfo, error) {
	names, paths, err := deviceNames()
	if err != nil {
		return nil, fmt.Errorf("%w: ibv_get_device_list: %v", provider.ErrNotSupported, err)
	}
	var out []DeviceInfo
	for i, n := range names {
		out = append(out, describe(n, paths[i]))
	}
	return out, nil
}

// describe opens device n to report it; a failure to open is the Error.
func describe(n, path string) DeviceInfo {
	in := DeviceInfo{Name: n, SysfsPath: path, GIDIndex: -1}
	d, err := openDev(n)
	if err != nil {
		in.Error = err.Error()
		return in
	}
	in.Caps, in.Addrs, in.PortActive = d.caps, d.addrs, d.portActive
	if d.gidIndex >= 0 {
		in.GIDIndex, in.GID = d.gidIndex, net.IP(d.gid[:])
	}
	d.Close()
	return in
}

// device is an open verbs context. Its maps are guarded by mu; caps and
// the handles are set at open and read-only after.
type device struct {
	name       string
	ctx        unsafe.Pointer
	caps       provider.Caps
	iwarp      bool
	gidIndex   int // RoCE v2 IPv4 GID of port 1; -1 when none
	gid        [16]byte
	addrs      []string
	portActive bool
	maxSGERd   int // SGEs a READ may scatter into (ibv_device_attr.max_sge_rd)

	events chan provider.AsyncEvent
	async  *os.File // dup of the async fd, for the netpoller

	cm *cmChannel

	mu     sync.RWMutex
	closed bool
	mrs    map[uint32]*mr // by lkey, for the busy count of posted WRs
	qps    map[*qp]struct{}
	cqs    map[*cq]struct{}
	pds    map[*pd]struct{}
	lns    map[*listener]struct{}
	wg     sync.WaitGroup // the async reader
}

func openDev(name string) (*device, error) {
	ctx, err := openDevice(name)
	if err != nil {
		return nil, fmt.Errorf("%w: ibv_open_device %s: %v", errnoClass(err), name, err)
	}
	d := &device{name: name, ctx: ctx, gidIndex: -1,
		events: make(chan provider.AsyncEvent, 64),
		mrs:    map[uint32]*mr{}, qps: map[*qp]struct{}{}, cqs: map[*cq]struct{}{},
		pds: map[*pd]struct{}{}, lns: map[*listener]struct{}{}}
	fail := func(err error) (*device, error) {
		if d.async != nil {
			d.async.Close()
		}
		closeDevice(ctx)
		return nil, err
	}
	a, err := queryDevice(ctx)
	if err != nil {
		return fail(fmt.Errorf("%w: ibv_query_device_ex %s: %v", errnoClass(err), name, err))
	}
	d.iwarp = a.transport == ibvTransportIWARP
	d.portActive = a.port_state == ibvPortActive
	// siw scatters a READ into its first SGE only (max_sge_rd 1,
	// drivers/infiniband/sw/siw/siw.h SIW_MAX_SGE_RD; siw_qp_rx.c
	// siw_orqe_start_rx copies sge[0] alone): more is refused at post.
	d.maxSGERd = int(a.max_sge_rd)
	if d.maxSGERd == 0 {
		d.maxSGERd = int(a.max_sge)
	}
	ifindex := 0
	if !d.iwarp && a.link_layer == ibvLinkEthernet {
		if i, gid, ifi := roceGID(ctx, int(a.gid_tbl_len)); i >= 0 {
			d.gidIndex, d.gid, ifindex = i, gid, ifi
		}
	}
	d.addrs = deviceAddrs(name, ifindex)
	d.caps = d.buildCaps(&a)
	if d.async, err = dupFile(asyncFd(ctx), name+" async events"); err != nil {
		return fail(err)
	}
	if d.cm, err = newCMChannel(d); err != nil {
		return fail(err)
	}
	d.wg.Add(1)
	go d.readAsync()
	return d, nil
}

// dupFile makes fd, a descriptor the C library reads, nonblocking and
// wraps a duplicate of it in an *os.File registered with the netpoller.
// The C library keeps (and closes) fd; closing the file wakes every waiter
// without touching it.
func dupFile(fd int, name string) (*os.File, error) {
	if err := setNonblock(fd); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", provider.ErrInvalidArgument, name, err)
	}
	nfd, err := syscall.Dup(fd)
	if err != nil {
		return nil, fmt.Errorf("%w: dup %s: %v", provider.ErrLimit, name, err)
	}
	syscall.CloseOnExec(nfd)
	if err := syscall.SetNonblock(nfd, true); err != nil {
		syscall.Close(nfd)
		return nil, fmt.Errorf("%w: %s: %v", provider.ErrInvalidArgument, name, err)
	}
	return os.NewFile(uintptr(nfd), name), nil
}

// software reports whether the kernel placed the device among its virtual
// devices (rxe, siw, rdmavt's): it has no bus parent, a CPU moves the bytes.
func software(name string) bool {
	p, err := filepath.EvalSymlinks("/sys/class/infiniband/" + name)
	return err != nil || strings.Contains(p, "/virtual/")
}

// deviceAddrs lists the IP addresses of the device's network interface:
// the GID's interface for RoCE, the sysfs netdev of port 1 otherwise.
func deviceAddrs(name string, ifindex int) []string {
	var ifi *net.Interface
	if ifindex > 0 {
		ifi, _ = net.InterfaceByIndex(ifindex)
	}
	if ifi == nil {
		for _, f := range []string{"/sys/class/infiniband/" + name + "/ports/1/gid_attrs/ndevs/0"} {
			if b, err := os.ReadFile(f); err == nil {
				ifi, _ = net.InterfaceByName(strings.TrimSpace(string(b)))
			}
		}
	}
	if ifi == nil {
		// siw names no netdev in sysfs; its node GUID is the netdev's
		// MAC, which finds the interface.
		if b, err := os.ReadFile("/sys/class/infiniband/" + name + "/node_guid"); err == nil {
			ifi = byGUID(strings.TrimSpace(string(b)))
		}
	}
	if ifi == nil {
		return nil
	}
	as, _ := ifi.Addrs()
	var out []string
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			out = append(out, n.IP.String())
		}
	}
	return out
}

func byGUID(guid string) *net.Interface {
	g := strings.ReplaceAll(guid, ":", "")
	ifs, _ := net.Interfaces()
	for i := range ifs {
		m := ifs[i].HardwareAddr
		if len(m) != 6 {
			continue
		}
		// siw's GUID is the netdev's MAC as an EUI-64 (ff:fe in the
		// middle, the universal/local bit flipped or not).
		for _, b0 := range []byte{m[0], m[0] ^ 2} {
			if g == fmt.Sprintf("%02x%02x%02xfffe%02x%02x%02x", b0, m[1], m[2], m[3], m[4], m[5]) {
				return &ifs[i]
			}
		}
	}
	return nil
}

func mtuBytes(m uint32) provider.MTU {
	if m < 1 || m > 5 {
		return 1024
	}
	return provider.MTU(128 << m)
}

// buildCaps reports what the device and its port say, and only that.
func (d *device) buildCaps(a *devAttr) provider.Caps {
	c := provider.Caps{
		Name:            d.name,
		DataPath:        provider.DataPathHardware,
		MaxMRSize:       uint64(a.max_mr_size),
		MaxMR:           uint32(a.max_mr),
		MaxPD:           uint32(a.max_pd),
		MaxQP:           uint32(a.max_qp),
		MaxQPWR:         uint32(a.max_qp_wr),
		MaxSGE:          min(uint32(a.max_sge), maxSGE),
		MaxCQ:           uint32(a.max_cq),
		MaxCQE:          uint32(a.max_cqe),
		MaxQPRdAtom:     uint8(min(a.max_qp_rd_atom, 255)),
		MaxQPInitRdAtom: uint8(min(a.max_qp_init_rd_atom, 255)),
		MaxMsgSize:      uint64(a.max_msg),
		PathMTU:         mtuBytes(uint32(a.active_mtu)),
		LinkSpeed:       linkSpeed(uint32(a.active_speed), uint32(a.active_width)),
	}
	if software(d.name) {
		c.DataPath = provider.DataPathSoftware
	}
	c.Opcodes = c.Opcodes.With(provider.OpSend, provider.OpWrite, provider.OpRead)
	switch a.atomic_cap {
	case ibvAtomicHCA:
		c.AtomicScope = provider.AtomicDevice
	case ibvAtomicGlob:
		c.AtomicScope = provider.AtomicGlobal
	}
	if c.AtomicScope != provider.AtomicNone {
		c.Opcodes = c.Opcodes.With(provider.OpCompareSwap, provider.OpFetchAdd)
	}
	if d.iwarp {
		// iWARP (RFC 5040) has no immediate data; the CM is the only way
		// to connect; a SEND without a receive terminates the stream.
		c.Transport = "verbs:iwarp"
		c.WriteCompletion = provider.CompletionLocal
		c.RNRRule = "iWARP has no RNR retry: a SEND that finds no receive posted terminates the connection (RFC 5040 7.4)"
		c.MaxPrivateData = 256 - 4 // MPA's limit less MPA v2's IRD/ORD words (siw)
	} else {
		c.Transport = "verbs:roce"
		if a.link_layer != ibvLinkEthernet {
			c.Transport = "verbs:ib"
		}
		c.Opcodes = c.Opcodes.With(provider.OpSendWithImm, provider.OpWriteWithImm)
		c.WriteCompletion = provider.CompletionAcked
		c.RNRRetry = true
		c.ManualConnect = d.gidIndex >= 0
		c.MaxPrivateData = 56 // IB CM REQ private data less rdma_cm's header
	}
	c.MaxInlineData = d.probeInline()
	return c
}

// probeInline finds the largest max_inline_data the device grants a QP:
// ibv_query_device does not report it.
func (d *device) probeInline() uint32 {
	pd, err := allocPD(d.ctx)
	if err != nil {
		return 0
	}
	defer deallocPD(pd)
	c, _, err := createCQ(d.ctx, 4, nil)
	if err != nil {
		return 0
	}
	defer destroyCQ(c)
	for _, n := range []uint32{1024, 512, 256, 128, 64, 32} {
		qc := qpCap{max_send_wr: 1, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: cuint(n)}
		q, _, err := createQP(pd, c, c, &qc, false)
		if err == nil {
			destroyQP(q)
			return uint32(qc.max_inline_data)
		}
	}
	return 0
}

// linkSpeed decodes ibv_port_attr's active_speed and active_width.
func linkSpeed(speed, width uint32) uint64 {
	per := map[uint32]uint64{1: 2_500_000_000, 2: 5_000_000_000, 4: 10_000_000_000, 8: 10_000_000_000,
		16: 14_000_000_000, 32: 25_000_000_000, 64: 50_000_000_000, 128: 100_000_000_000}[speed]
	lanes := map[uint32]uint64{1: 1, 2: 4, 4: 8, 8: 12, 16: 2}[width]
	return per * lanes
}

func (d *device) Caps() provider.Caps { return d.caps }

func (d *device) Events() <-chan provider.AsyncEvent { return d.events }

// readAsync owns the async fd: it delivers each event to Events until the
// device closes, then closes the channel.
func (d *device) readAsync() {
	defer d.wg.Done()
	defer close(d.events)
	rc, err := d.async.SyscallConn()
	if err != nil {
		return
	}
	for {
		// Each event is delivered as it is read: Read returns only when
		// the callback says it is done, and it never is.
		err := rc.Read(func(uintptr) bool {
			for {
				typ, qpn, err := getAsync(d.ctx)
				if err != nil {
					return !errors.Is(err, syscall.EAGAIN)
				}
				if t := asyncType(typ); t != 0 {
					d.deliver(provider.AsyncEvent{Type: t, QPN: qpn})
				}
			}
		})
		if err != nil {
			return
		}
	}
}

// deliver queues an event without blocking: a program that does not read
// Events must not stall the device.
func (d *device) deliver(e provider.AsyncEvent) {
	select {
	case d.events <- e:
	default:
	}
}

func asyncType(t uint32) provider.EventType {
	switch t {
	case ibvEvCQErr:
		return provider.EventCQError
	case ibvEvQPFatal:
		return provider.EventQPFatal
	case ibvEvQPReqErr:
		return provider.EventQPRequestErr
	case ibvEvQPAccessErr:
		return provider.EventQPAccessErr
	case ibvEvCommEst:
		return provider.EventCommEstablished
	case ibvEvLastWQE:
		return provider.EventQPLastWQEReached
	case ibvEvDevFatal:
		return provider.EventDeviceFatal
	}
	return 0
}

// Close destroys every object of the device, connections first.
func (d *device) Close() error {
	d.mu.Lock()
	if err := devcore.CloseOnce(&d.closed); err != nil {
		d.mu.Unlock()
		return err
	}
	lns, qps := slices.Collect(maps.Keys(d.lns)), slices.Collect(maps.Keys(d.qps))
	cqs, pds := slices.Collect(maps.Keys(d.cqs)), slices.Collect(maps.Keys(d.pds))
	mrs := make([]*mr, 0, len(d.mrs))
	for _, m := range d.mrs {
		mrs = append(mrs, m)
	}
	d.mu.Unlock()
	for _, l := range lns {
		l.Close()
	}
	for _, q := range qps {
		q.Close()
	}
	for _, m := range mrs {
		m.release()
	}
	for _, c := range cqs {
		c.Close()
	}
	for _, p := range pds {
		p.Close()
	}
	d.cm.close()
	d.async.Close()
	d.wg.Wait()
	closeDevice(d.ctx)
	return nil
}

func (d *device) isClosed() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.closed
}

// errnoClass maps an errno of libibverbs or librdmacm to the verbs error
// class that means the same.
func errnoClass(err error) error {
	var e syscall.Errno
	if !errors.As(err, &e) {
		return provider.ErrInvalidArgument
	}
	switch e {
	case syscall.ENOMEM, syscall.ENOSPC, syscall.EMFILE, syscall.ENFILE:
		return provider.ErrLimit
	case syscall.EOPNOTSUPP, syscall.ENOSYS, syscall.EPROTONOSUPPORT, syscall.ENODEV, syscall.ENXIO:
		return provider.ErrNotSupported
	case syscall.EBUSY, syscall.EADDRINUSE:
		return provider.ErrBusy
	case syscall.ETIMEDOUT:
		return provider.ErrTimeout
	case syscall.ECONNREFUSED:
		return provider.ErrRejected
	case syscall.ECONNRESET, syscall.ENOTCONN:
		return provider.ErrDisconnected
	case syscall.EBADF:
		return provider.ErrClosed
	}
	return provider.ErrInvalidArgument
}

// wrap returns err in its verbs class with the call that failed.
func wrap(call string, err error) error {
	return fmt.Errorf("%w: %s: %v", errnoClass(err), call, err)
}
