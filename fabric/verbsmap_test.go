//go:build cgo && libfabric

package fabric

import (
	"syscall"
	"testing"

	"github.com/goverbs/goverbs/provider"
)

// TestVerbsErrorStatus checks how an error completion of the verbs
// provider (fi_errno FI_EIO, the ibv_wc_status as prov_errno) becomes a
// verbs status, and that only a flush counts as the connection's loss; a
// provider without wcStatus keeps the fi_errno rules, where EIO is one.
func TestVerbsErrorStatus(t *testing.T) {
	verbsDev := &Device{feat: features{wcStatus: true}}
	eio := int32(syscall.EIO)
	for _, c := range []struct {
		e        cqEntry
		recv     bool
		want     provider.Status
		connLost bool
	}{
		{cqEntry{err: eio, provErrno: 10}, false, provider.StatusRemAccessErr, false},   // REM_ACCESS_ERR
		{cqEntry{err: eio, provErrno: 11}, false, provider.StatusRemOpErr, false},       // REM_OP_ERR
		{cqEntry{err: eio, provErrno: 9}, false, provider.StatusRemInvReqErr, false},    // REM_INV_REQ_ERR
		{cqEntry{err: eio, provErrno: 1}, true, provider.StatusLocLenErr, false},        // LOC_LEN_ERR
		{cqEntry{err: eio, provErrno: 4}, false, provider.StatusLocProtErr, false},      // LOC_PROT_ERR
		{cqEntry{err: eio, provErrno: 12}, false, provider.StatusRetryExcErr, false},    // RETRY_EXC_ERR
		{cqEntry{err: eio, provErrno: 13}, false, provider.StatusRNRRetryExcErr, false}, // RNR_RETRY_EXC_ERR
		{cqEntry{err: eio, provErrno: 5}, false, provider.StatusWRFlushErr, true},       // WR_FLUSH_ERR
		{cqEntry{err: int32(syscall.ECANCELED)}, true, provider.StatusWRFlushErr, true},
		{cqEntry{err: eio, provErrno: 99}, false, provider.StatusWRFlushErr, false}, // unknown: the fi_errno's rule, not a lost connection
	} {
		st, vendor := verbsDev.errorStatus(&c.e, c.recv)
		if st != c.want || verbsDev.connectionLevel(vendor) != c.connLost {
			t.Errorf("verbs %+v: %v, connection-level %v; want %v, %v", c.e, st, verbsDev.connectionLevel(vendor), c.want, c.connLost)
		}
	}
	tcpDev := &Device{}
	st, vendor := tcpDev.errorStatus(&cqEntry{err: eio, provErrno: 10}, false)
	if st != provider.StatusWRFlushErr || !tcpDev.connectionLevel(vendor) {
		t.Errorf("tcp EIO: %v, connection-level %v; want a flush of a lost connection", st, tcpDev.connectionLevel(vendor))
	}
}
