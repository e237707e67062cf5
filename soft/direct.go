package soft

import (
	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// Helpers for links whose initiators reach a peer's memory directly (shared
// memory): the initiator repeats the responder's checks against descriptors
// the owner published, with the same function QP.Access uses, so both apply
// the same rules in the same order.

// RemoteAccess returns the remote rights the QP grants its peer now (its
// access flags), without locking, for a link that publishes them.
func (qp *QP) RemoteAccess() provider.Access { return provider.Access(qp.remoteAccess.Load()) }

// CheckDescriptor applies the checks of QP.Access that follow the key
// lookup, in the same order, to a request for n bytes at addr needing need:
// the QP's access flags qpAccess, which gate every remote right (READ,
// WRITE, atomics, and FLUSH's global and persistent flush rights, as IBTA
// 1.5 and rxe's check_qp_attr_access have it), then the rights and the
// bounds (overflow included) of a region or window [base, base+size)
// granting rights. The caller has found the descriptor by rkey among the
// regions of the QP's protection domain. A zero-length request passes
// without any check, as in QP.Access.
func CheckDescriptor(qpAccess provider.Access, base, size uint64, rights provider.Access, addr, n uint64, need provider.Access) Fault {
	if n == 0 {
		return FaultNone
	}
	if !qpAccess.Has(need & provider.AccessRemote) {
		return FaultQPRights
	}
	if !rights.Has(need) {
		return FaultRights
	}
	if addr < base || addr-base > size || n > size-(addr-base) {
		return FaultBounds
	}
	return FaultNone
}

// CompleteSends finishes, in one critical section, send WQEs the link took
// with NextSend and executed successfully: for each the effect of
// CompleteSend(w, StatusSuccess, 0). A link that performs many small
// operations itself (shared memory) saves a lock round trip per WQE.
func (qp *QP) CompleteSends(ws []*SendWQE) {
	qp.mu.Lock()
	unblocked := false
	for _, w := range ws {
		if w.e.State != devcore.Started {
			continue // already flushed by a reset
		}
		unblocked = unblocked || w.holdsRR
		qp.completeSendLocked(w, provider.StatusSuccess, 0)
	}
	if unblocked {
		qp.unlockThen(Endpoint.SendReady)
		return
	}
	qp.mu.Unlock()
}
