package iw

// CheckULPDU validates the headers at the start of a received ULPDU (an
// FPDU's DDP segment, without length field, pad and CRC) before any field
// is trusted. ext says whether the peer announced the RFC 7306 extensions;
// without them opcodes 0x8-0xB are unexpected, as they are for Linux siw.
//
// On success it returns the opcode and the length of all headers (DDP plus
// RDMAP, a Terminate's attached copies included), so the payload is
// u[hdrLen:]. On failure the error is a *[TermError] whose Term is the
// Terminate to send:
//
//	check failed                          Terminate (layer / error type / code)
//	segment shorter than its DDP header   DDP / local catastrophic
//	DDP version not 1                     DDP / tagged or untagged buffer / invalid DDP version
//	RDMAP version not 1                   RDMAP / remote operation / invalid RDMAP version
//	opcode unknown, or wrong T bit        RDMAP / remote operation / unexpected opcode
//	queue number wrong for the opcode     DDP / untagged buffer / invalid QN
//	too short for the RDMAP header        RDMAP / remote operation / unspecified
//	atomic opcode not FetchAdd/CmpSwap    RDMAP / remote operation / unexpected opcode
//
// The RFCs name the codes for the version, opcode and QN checks (RFC 5040
// §4.8, RFC 5041 §7.2); the mappings for short segments and for an unknown
// atomic opcode are goverbs' choice, as no RFC code fits them exactly.
// Semantic checks (STag, bounds, MSN, MO, buffer sizes) belong to the
// engine, which owns that state.
func CheckULPDU(u []byte, ext bool) (op Opcode, hdrLen int, err error) {
	if len(u) < 2 {
		return 0, 0, termErr(LayerDDP, ETypeDDPCatastrophic, CodeLocalCatastrophic,
			"%d-byte DDP segment", len(u))
	}
	ctl := DDPControl(u[ddpCtl])
	if err := checkDDPControl(ctl, len(u)); err != nil {
		return 0, 0, err
	}
	rc := RDMAPControl(u[rdmapCtl])
	if rc.Version() != RDMAPVersion {
		return 0, 0, termErr(LayerRDMAP, ETypeRDMAPRemoteOperation, CodeRDMAPInvalidVersion,
			"RDMAP version %d", rc.Version())
	}
	op = rc.Opcode()
	if !op.Known(ext) || op.Tagged() != ctl.Tagged() {
		return 0, 0, termErr(LayerRDMAP, ETypeRDMAPRemoteOperation, CodeRDMAPUnexpectedOpcode,
			"%v (T=%t)", op, ctl.Tagged())
	}
	if op.Tagged() {
		return op, DDPTaggedHeaderSize, nil
	}
	n, err := checkUntagged(DDPUntagged(u), op)
	return op, n, err
}

func checkDDPControl(ctl DDPControl, n int) error {
	if ctl.Version() != DDPVersion {
		if ctl.Tagged() {
			return termErr(LayerDDP, ETypeDDPTaggedBuffer, CodeDDPTaggedInvalidVersion,
				"DDP version %d", ctl.Version())
		}
		return termErr(LayerDDP, ETypeDDPUntaggedBuffer, CodeDDPUntaggedInvalidVersion,
			"DDP version %d", ctl.Version())
	}
	if n < ddpHeaderSize(ctl) {
		return termErr(LayerDDP, ETypeDDPCatastrophic, CodeLocalCatastrophic,
			"%d-byte DDP segment, header needs %d", n, ddpHeaderSize(ctl))
	}
	return nil
}

// checkUntagged checks the queue number and the RDMAP header of an
// untagged segment whose DDP header is known to be complete.
func checkUntagged(h DDPUntagged, op Opcode) (int, error) {
	if qn, _ := op.QN(); h.QN() != qn {
		return 0, termErr(LayerDDP, ETypeDDPUntaggedBuffer, CodeDDPUntaggedInvalidQN,
			"%v on QN %d, want %d", op, h.QN(), qn)
	}
	rest := h.Payload()
	n, ok := rdmapHeaderLen(op, rest)
	if !ok {
		return 0, termErr(LayerRDMAP, ETypeRDMAPRemoteOperation, CodeRDMAPUnspecified,
			"%v header needs at least %d bytes, segment has %d", op, n, len(rest))
	}
	if op == OpAtomicRequest && !AtomicRequest(rest).Op().Known() {
		return 0, termErr(LayerRDMAP, ETypeRDMAPRemoteOperation, CodeRDMAPUnexpectedOpcode,
			"atomic opcode %d", AtomicRequest(rest).Op())
	}
	return DDPUntaggedHeaderSize + n, nil
}

// rdmapHeaderLen returns the length of op's RDMAP header at the start of
// rest and whether rest holds all of it. A Terminate's length depends on
// its D and R bits and on the copied DDP header's T bit.
func rdmapHeaderLen(op Opcode, rest []byte) (int, bool) {
	if op == OpTerminate {
		n, err := terminateLen(rest)
		return max(n, TerminateControlSize), err == nil
	}
	n := op.HeaderLen()
	return n, len(rest) >= n
}
