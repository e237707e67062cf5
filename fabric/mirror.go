//go:build cgo && libfabric

package fabric

// Go mirrors of the C structs of cgo.go. Each holds no Go pointer, so a
// pointer to one may be passed to C; init in cgo.go checks the sizes.

// sgeDesc is one local buffer of an operation: address, length and the
// provider's memory descriptor (fi_mr_desc, or 0).
type sgeDesc struct {
	addr, len, desc uint64
}

// wrDesc describes one libfabric operation for _C_post (gv_wr).
type wrDesc struct {
	op, nsge                      uint32
	flags, ctx, raddr, rkey, data uint64
	cmp, operand, cmpDesc, opDesc uint64
	sge                           [cMaxSGE]sgeDesc
}

// cqEntry is one completion read by _C_cq_read (gv_cqe): the tag of the
// operation's context (0 when it is not ours), the libfabric completion
// flags, length and remote CQ data, and for an error completion the
// fi_errno and provider error.
type cqEntry struct {
	tag, flags, len, data uint64
	err, provErrno        int32
}

// eqEvent is one event read by _C_eq_read (gv_eqe). event is eqError for
// an error entry (err set); fid names the endpoint or passive endpoint; info
// is the fi_info of an FI_CONNREQ (the reader frees it); data holds the
// connection data, or the error data of a rejection.
type eqEvent struct {
	event          uint32
	err, provErrno int32
	datalen        uint32
	fid, info      uint64
	data           [cCMDataMax]byte
}

// infoAttrs are the fields of an fi_info the package reads (gv_attrs).
type infoAttrs struct {
	caps, mode, txOpFlags, txMsgOrder, rxMsgOrder, maxMsgSize uint64
	txSize, rxSize, txIOV, rxIOV, rmaIOV, inject              uint64
	epCnt, cqCnt, mrCnt, mrKeySize, cqDataSize, mrIOV         uint64
	linkSpeed, mtu                                            uint64
	mrMode, epType, addrFormat, threading, dataProgress       uint32
	controlProgress, provVersion, apiVersion                  uint32
}
