package soft

import (
	"github.com/goverbs/goverbs/provider"
)

// Fault says why a remote access was refused. Links map it onto their wire's
// error (an iWARP Terminate code, an InfiniBand NAK); the requester sees
// StatusRemAccessErr for every fault.
type Fault uint8

// Remote access faults.
const (
	FaultNone       Fault = iota
	FaultInvalidKey       // no region or window has the key
	FaultPD               // the key belongs to another protection domain
	FaultQP               // a type 2 window bound to another QP
	FaultBounds           // the range leaves the region or window (overflow included)
	FaultRights           // the region or window does not grant the right
	FaultQPRights         // the QP does not grant the right to its peer
	FaultAlignment        // an atomic target is not 8-byte aligned
)

var faultNames = [...]string{
	FaultNone:       "none",
	FaultInvalidKey: "invalid key",
	FaultPD:         "key of another protection domain",
	FaultQP:         "window bound to another QP",
	FaultBounds:     "base or bounds violation",
	FaultRights:     "access rights violation",
	FaultQPRights:   "QP access rights violation",
	FaultAlignment:  "misaligned atomic",
}

func (f Fault) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return "unknown fault"
}

// Target is remote-accessible memory a link may read or write: the bytes of
// one request, held against deregistration until Release.
type Target struct {
	Buf []byte
	mr  *MR
}

// Release ends the access; Target must not be used afterwards.
func (t *Target) Release() {
	if t.mr != nil {
		t.mr.remoteRefs.Add(-1)
		t.mr = nil
	}
	t.Buf = nil
}

// Access resolves a remote request on qp for n bytes at (rkey, addr) that
// needs the rights need (a single remote right, or flush rights). It checks,
// in this order, the key, the protection domain, the window's QP, then (in
// CheckDescriptor) the QP's own access flags, the region's or window's
// rights and the bounds (SEMANTICS 14). A zero-length access needs no key
// and touches nothing.
func (qp *QP) Access(rkey uint32, addr, n uint64, need provider.Access) (Target, Fault) {
	if n == 0 {
		return Target{}, FaultNone
	}
	keys := qp.dev.keys
	keys.mu.RLock()
	defer keys.mu.RUnlock()
	ref, ok := keys.lookupLocked(rkey)
	if !ok || ref.local {
		return Target{}, FaultInvalidKey
	}
	mr, base, size, rights := ref.mr, uint64(0), uint64(0), provider.Access(0)
	if mw := ref.mw; mw != nil {
		if mw.pd != qp.pd {
			return Target{}, FaultPD
		}
		if mw.typ == provider.MWType2 && mw.qp != qp {
			return Target{}, FaultQP
		}
		mr, base, size, rights = mw.mr, mw.addr, mw.length, mw.access
	} else {
		base, size, rights = mr.addr, uint64(len(mr.buf)), mr.access
	}
	if mr.pd != qp.pd {
		return Target{}, FaultPD
	}
	if f := CheckDescriptor(qp.RemoteAccess(), base, size, rights, addr, n, need); f != FaultNone {
		return Target{}, f
	}
	buf, _ := span(mr.buf, mr.addr, addr, n)
	mr.remoteRefs.Add(1)
	return Target{Buf: buf, mr: mr}, FaultNone
}

// AtomicAccess resolves the 8-byte target of an atomic, ATOMIC WRITE
// (need = AccessRemoteWrite) or compare-and-swap/fetch-and-add (need =
// AccessRemoteAtomic); the address must be 8-byte aligned.
func (qp *QP) AtomicAccess(rkey uint32, addr uint64, need provider.Access) (Target, Fault) {
	if addr%8 != 0 {
		return Target{}, FaultAlignment
	}
	return qp.Access(rkey, addr, 8, need)
}

// resolveLocalLocked resolves one local SGE of a work request on a QP of pd.
// write says the device will write the memory (a receive, or the
// destination of a READ or an atomic), which needs local-write.
// It takes a reference on the region that the WQE releases at completion.
// Precondition: keys.mu is held for reading.
func resolveLocalLocked(keys *keyTable, pd *PD, sge provider.SGE, write bool) ([]byte, *MR, bool) {
	ref, ok := keys.lookupLocked(sge.LKey)
	if !ok || !ref.local || ref.mr.pd != pd {
		return nil, nil, false
	}
	mr := ref.mr
	if write && !mr.access.Has(provider.AccessLocalWrite) {
		return nil, nil, false
	}
	b, ok := span(mr.buf, mr.addr, sge.Addr, uint64(sge.Length))
	if !ok {
		return nil, nil, false
	}
	mr.localRefs.Add(1)
	return b, mr, true
}
