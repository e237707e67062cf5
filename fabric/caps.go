//go:build cgo && libfabric

package fabric

import (
	"errors"
	"fmt"
	"math"
	"syscall"

	"github.com/goverbs/goverbs/provider"
)

// features are what the device learned from fi_getinfo and
// fi_query_atomic, and how it maps verbs onto them.
type features struct {
	mrLocal  bool // FI_MR_LOCAL: local buffers need fi_mr_desc
	virtAddr bool // FI_MR_VIRT_ADDR: remote addresses are virtual, else offsets
	provKey  bool // FI_MR_PROV_KEY: the provider picks rkeys
	// rxCQData (mode FI_RX_CQ_DATA): remote CQ data consumes a receive, so
	// WRITE_WITH_IMM is fi_writedata.
	rxCQData bool
	// wideData: 8 bytes of CQ data carry our flag bits beside the
	// immediate (solicited, and WRITE_WITH_IMM as WRITE + SEND).
	wideData bool
	cqData   bool // any remote CQ data (4 bytes at least)
	orderSAW bool // a SEND is delivered after earlier WRITEs are placed
	orderRAW bool // a READ sees earlier WRITEs
	// complFlags are added to every SEND, WRITE and ATOMIC WRITE:
	// FI_DELIVERY_COMPLETE where offered (and not declined by the spec),
	// so their completion means the peer has placed the data, and an
	// operation the peer never took (it died, it refused) completes in
	// error.
	complFlags          uint64
	cswap, fadd, awrite bool
	// wcStatus: error completions carry libibverbs' ibv_wc_status as
	// prov_errno (the verbs provider), which decides their status.
	wcStatus bool
	// iwarp: the verbs provider over an iWARP device. A READ lands in one
	// local SGE: an iWARP RDMA Read Request carries a single data sink
	// (RFC 5040), so iWARP devices scatter a READ response into their
	// first SGE only (siw: max_sge_rd 1), and libfabric's verbs provider
	// does not report max_sge_rd. There is no RNR.
	iwarp bool
}

// hintCaps are the capabilities every device needs.
const hintCaps = fiMsg | fiRMA | fiRead | fiWrite | fiSend | fiRecv | fiRemoteRead | fiRemoteWrite

// hintModes are the modes the package supports: it always passes a
// provider-owned context (fi_context2) with every operation, and it
// consumes a receive for remote CQ data where the provider asks.
const hintModes = fiModeContext | fiModeContext2 | fiModeRxCQData

// hintMRMode are the registration modes the package honours.
const hintMRMode = fiMRLocal | fiMRVirtAddr | fiMRAlloc | fiMRProvKey

// verbsIWARPFabric is the fabric the verbs provider puts iWARP devices in
// (verbs_info.c, VERBS_IWARP_FABRIC).
const verbsIWARPFabric = "Ethernet-iWARP"

// maxSGE bounds the SGE lists the package passes in one call.
const maxSGE = cMaxSGE

// maxCQE bounds a CQ: its completions live in a Go ring.
const maxCQE = 1 << 22

// maxPDs bounds the PDs of a device: each is a libfabric domain, and
// fi_getinfo states no limit on domains.
const maxPDs = 1 << 12

// getInfo finds the provider's connected-endpoint info, with atomics if it
// has them.
func getInfo(s Spec) (hInfo, bool, error) {
	for _, c := range []uint64{hintCaps | fiAtomic, hintCaps} {
		info, err := _C_getinfo(s.Provider, s.Fabric, s.Domain, fiEPMsg, c, hintModes, hintMRMode, 0)
		if err == nil {
			return info, c&fiAtomic != 0, nil
		}
		if !errors.Is(err, syscall.ENODATA) {
			return 0, false, opErr("fi_getinfo", err, s.String())
		}
	}
	why := "no such provider, fabric or domain"
	if p, err := Providers(); err == nil {
		for _, pi := range p {
			if pi.Name == s.Provider && !pi.Usable {
				why = "it offers no connected (FI_EP_MSG) endpoints with FI_MSG and FI_RMA; " +
					"reliable-datagram (FI_EP_RDM) providers are not supported by this package"
			}
		}
	}
	return 0, false, &Error{Op: "fi_getinfo", Errno: Errno(syscall.ENODATA), Class: provider.ErrNotSupported,
		Detail: s.String() + ": " + why}
}

// deliveryOffered asks fi_getinfo whether the provider accepts
// FI_DELIVERY_COMPLETE as a transmit operation flag.
func deliveryOffered(s Spec, caps uint64) bool {
	info, err := _C_getinfo(s.Provider, s.Fabric, s.Domain, fiEPMsg, caps, hintModes, hintMRMode, fiDeliveryComp)
	if err != nil {
		return false
	}
	_C_freeinfo(info)
	return true
}

// probe reads what needs live objects: the connection data limit of a
// passive endpoint and the atomics of a domain.
func (d *Device) probe() error {
	a := &d.attrs
	f := &d.feat
	f.mrLocal = a.mrMode&fiMRLocal != 0
	f.virtAddr = a.mrMode&fiMRVirtAddr != 0
	f.provKey = a.mrMode&fiMRProvKey != 0
	f.rxCQData = a.mode&fiModeRxCQData != 0
	f.cqData = a.cqDataSize >= 4
	f.wideData = a.cqDataSize >= 8
	f.orderSAW = a.txMsgOrder&fiOrderSAW != 0 && a.rxMsgOrder&fiOrderSAW != 0
	f.orderRAW = a.txMsgOrder&fiOrderRAW != 0 && a.rxMsgOrder&fiOrderRAW != 0
	f.wcStatus = coreProvider(d.provName) == "verbs"
	f.iwarp = f.wcStatus && d.fabName == verbsIWARPFabric
	if a.mrMode&(fiMREndpoint|fiMRRaw) != 0 {
		return &Error{Op: "fi_getinfo", Errno: Errno(syscall.EOPNOTSUPP), Class: provider.ErrNotSupported,
			Detail: "the provider needs FI_MR_ENDPOINT or FI_MR_RAW registration, which this package does not implement"}
	}
	pep, err := _C_passive_ep(d.fabric, d.info, d.eq, false)
	if err != nil {
		return opErr("fi_passive_ep", err, "probing the connection data limit")
	}
	d.cmData, err = _C_cm_data_size(pep)
	_C_close(pep)
	if err != nil {
		return opErr("fi_getopt(FI_OPT_CM_DATA_SIZE)", err)
	}
	if d.cmData <= cmHeaderLen {
		return &Error{Op: "fi_getopt(FI_OPT_CM_DATA_SIZE)", Errno: ETOOSMALL, Class: provider.ErrNotSupported,
			Detail: fmt.Sprintf("%d bytes of connection data leave no room for goverbs' %d-byte header", d.cmData, cmHeaderLen)}
	}
	d.cmData = min(d.cmData, cCMDataMax)
	dom, err := _C_domain(d.fabric, d.info)
	if err != nil {
		return opErr("fi_domain", err)
	}
	defer _C_close(dom)
	if a.caps&fiAtomic != 0 && !d.quirks.noAtomics {
		f.cswap = _C_query_atomic(dom, fiCSwap, fiCompareOp) == nil
		f.fadd = _C_query_atomic(dom, fiSum, fiFetchOp) == nil
		f.awrite = _C_query_atomic(dom, fiAtomicWrite, 0) == nil
	}
	if f.provKey {
		// A registration cache (see initLibfabric) would give every
		// region all rights and keep its key across re-registration.
		shared, err := _C_mr_shared(dom)
		if err != nil {
			return opErr("fi_mr_reg", err, "probing the registration cache")
		}
		if shared {
			return &Error{Op: "fi_mr_reg", Errno: Errno(syscall.EOPNOTSUPP), Class: provider.ErrNotSupported,
				Detail: "the provider's registration cache shares one registration, with all rights, among regions " +
					"of the same memory; unset " + mrCacheEnv + " or set it to 0"}
		}
	}
	return nil
}

// buildCaps derives the verbs capabilities from fi_getinfo's answer.
func (d *Device) buildCaps() provider.Caps {
	a := &d.attrs
	f := &d.feat
	clamp32 := func(v uint64) uint32 { return uint32(min(v, math.MaxUint32)) }
	ops := provider.OpcodeSet(0).With(provider.OpSend, provider.OpWrite, provider.OpRead)
	if f.cqData {
		ops = ops.With(provider.OpSendWithImm)
	}
	if (f.rxCQData && f.cqData) || (f.wideData && f.orderSAW) {
		ops = ops.With(provider.OpWriteWithImm)
	}
	scope := provider.AtomicNone
	if f.cswap {
		ops = ops.With(provider.OpCompareSwap)
	}
	if f.fadd {
		ops = ops.With(provider.OpFetchAdd)
	}
	if f.awrite {
		ops = ops.With(provider.OpAtomicWrite)
	}
	if f.cswap || f.fadd {
		// libfabric atomics are atomic against other atomics through the
		// provider, not against the target CPU's own accesses.
		scope = provider.AtomicDevice
	}
	wc := provider.CompletionLocal
	if f.complFlags&fiDeliveryComp != 0 {
		wc = provider.CompletionPlaced
	}
	mtu := provider.MTU(4096)
	if m := provider.MTU(a.mtu); a.mtu <= 4096 && m.Valid() {
		mtu = m
	}
	wr := clamp32(min(a.txSize, a.rxSize))
	rd := uint8(min(a.txSize, 128))
	maxMR := clamp32(a.mrCnt)
	if maxMR == 0 {
		// mr_cnt 0: the provider states no limit; the 32-bit key space is.
		maxMR = 1 << 24
	}
	maxCQ := clamp32(a.cqCnt)
	if maxCQ == 0 {
		maxCQ = 1 << 10
	}
	maxQP := clamp32(min(a.epCnt, maxQPs))
	if maxQP == 0 {
		maxQP = maxQPs
	}
	return provider.Caps{
		Name:      d.provName + "/" + d.domName,
		Transport: "fabric:" + d.provName,
		DataPath:  dataPath(d.provName),
		MaxMRSize: min(a.maxMsgSize, 1<<47),
		MaxMR:     maxMR,
		MaxPD:     maxPDs, // one libfabric domain per PD; fi_getinfo states no limit
		MaxMW:     0,
		MaxQP:     maxQP,
		MaxQPWR:   wr,
		// rma_iov_limit bounds the remote iovecs of one RMA (goverbs
		// passes one), not its local SGEs, which iov_limit bounds.
		MaxSGE:          clamp32(min(a.txIOV, a.rxIOV, maxSGE)),
		MaxInlineData:   clamp32(a.inject),
		MaxCQ:           maxCQ,
		MaxCQE:          maxCQE,
		MaxQPRdAtom:     rd,
		MaxQPInitRdAtom: rd,
		MaxMsgSize:      min(a.maxMsgSize, 1<<31),
		MaxPrivateData:  d.cmData - cmHeaderLen,
		Opcodes:         ops,
		AtomicScope:     scope,
		WriteCompletion: wc,
		Persistence:     false,
		ManualConnect:   false,
		RNRRetry:        false,
		RNRRule:         d.rnrRule(),
		PathMTU:         mtu,
		LinkSpeed:       a.linkSpeed,
	}
}

// rnrRule says what a SEND that finds no receive posted does.
func (d *Device) rnrRule() string {
	switch {
	case d.feat.iwarp:
		return "iWARP has no RNR: a SEND that finds no receive posted terminates the connection (RFC 5040)"
	case d.feat.wcStatus:
		return "the verbs provider connects with rnr_retry_count 7 (retry forever): a SEND that finds no " +
			"receive posted is retried by the device until one is"
	}
	return "libfabric connected endpoints have no RNR NAK: a SEND that finds no receive posted " +
		"waits at the receiver (the provider's flow control) until one is, with no retry limit"
}

func dataPath(prov string) provider.DataPath {
	if IsHardware(prov) {
		return provider.DataPathHardware
	}
	return provider.DataPathSoftware
}

// Info describes how the device maps verbs onto its provider: the
// provider, fabric and domain, the registration mode, and per opcode the
// libfabric call that carries it.
func (d *Device) Info() DeviceInfo {
	f := &d.feat
	di := DeviceInfo{Provider: d.provName, Fabric: d.fabName, Domain: d.domName,
		MRMode: mrModeNames(d.attrs.mrMode), ZeroBased: !f.virtAddr, ProviderKeys: f.provKey,
		ConnDataLimit: d.cmData, Ops: map[provider.Opcode]string{
			provider.OpSend:  "fi_sendmsg" + flagText(f.complFlags),
			provider.OpWrite: "fi_writemsg" + flagText(f.complFlags),
			provider.OpRead:  "fi_readmsg",
		}}
	ops := d.caps.Opcodes
	if ops.Has(provider.OpSendWithImm) {
		di.Ops[provider.OpSendWithImm] = "fi_sendmsg with FI_REMOTE_CQ_DATA" + flagText(f.complFlags)
	}
	if ops.Has(provider.OpWriteWithImm) {
		if f.rxCQData {
			di.Ops[provider.OpWriteWithImm] = "fi_writemsg with FI_REMOTE_CQ_DATA (consumes a receive: FI_RX_CQ_DATA)"
		} else {
			di.Ops[provider.OpWriteWithImm] = "fi_writemsg, then a zero-length fi_sendmsg with FI_REMOTE_CQ_DATA " +
				"carrying the immediate and length (ordered by FI_ORDER_SAW; the provider's remote CQ data does not consume a receive)"
		}
	}
	if ops.Has(provider.OpCompareSwap) {
		di.Ops[provider.OpCompareSwap] = "fi_compare_atomicmsg FI_CSWAP FI_UINT64"
	}
	if ops.Has(provider.OpFetchAdd) {
		di.Ops[provider.OpFetchAdd] = "fi_fetch_atomicmsg FI_SUM FI_UINT64"
	}
	if ops.Has(provider.OpAtomicWrite) {
		di.Ops[provider.OpAtomicWrite] = "fi_atomicmsg FI_ATOMIC_WRITE FI_UINT64"
	}
	return di
}

func flagText(f uint64) string {
	if f&fiDeliveryComp != 0 {
		return " (FI_DELIVERY_COMPLETE)"
	}
	return ""
}

// DeviceInfo describes a device's mapping onto libfabric (Device.Info).
type DeviceInfo struct {
	Provider, Fabric, Domain string
	MRMode                   []string
	// ZeroBased reports regions addressed from 0 (Addr() == 0), because
	// the provider takes offsets, not virtual addresses (no
	// FI_MR_VIRT_ADDR), as with IBV_ACCESS_ZERO_BASED.
	ZeroBased bool
	// ProviderKeys reports that the provider picks the rkeys
	// (FI_MR_PROV_KEY); otherwise they come from crypto/rand.
	ProviderKeys bool
	// ConnDataLimit is the provider's connection data limit; goverbs'
	// header takes part of it (Caps.MaxPrivateData is the rest).
	ConnDataLimit int
	// Ops names the libfabric call behind each supported opcode.
	Ops map[provider.Opcode]string
}
