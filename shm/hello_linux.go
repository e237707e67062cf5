package shm

import (
	"fmt"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// protoVersion is the version of the connection protocol.
const protoVersion = 1

// hello is the body of a connection request (msgReq) and of its acceptance
// (msgRep): the sender's QP and what it offers.
type hello struct {
	version  uint32
	qpn, psn uint32
	// ird is the number of READ/atomic requests the sender accepts
	// outstanding; ord the number it wants to have outstanding.
	ird, ord        uint8
	retry, rnrRetry uint8
	pdata           []byte
}

func (h *hello) encode(typ uint8) []byte {
	w := wire{b: []byte{typ}}
	w.u32(h.version)
	w.u32(h.qpn)
	w.u32(h.psn)
	w.u8(h.ird)
	w.u8(h.ord)
	w.u8(h.retry)
	w.u8(h.rnrRetry)
	w.bytes(h.pdata)
	return w.b
}

func decodeHello(b []byte) (hello, error) {
	u := unwire{b: b}
	h := hello{version: u.u32(), qpn: u.u32(), psn: u.u32(), ird: u.u8(), ord: u.u8(), retry: u.u8(), rnrRetry: u.u8()}
	h.pdata = u.bytes(MaxPrivateData)
	if u.err != nil {
		return hello{}, u.err
	}
	if h.version != protoVersion {
		return hello{}, fmt.Errorf("%w: shm protocol version %d, want %d", provider.ErrProtocol, h.version, protoVersion)
	}
	return h, nil
}

// reject is the body of msgRej.
type reject struct {
	pdata  []byte
	reason string
}

func (r *reject) encode() []byte {
	w := wire{b: []byte{msgRej}}
	w.bytes(r.pdata)
	w.bytes([]byte(r.reason))
	return w.b
}

func decodeReject(b []byte) (reject, error) {
	u := unwire{b: b}
	r := reject{pdata: u.bytes(MaxPrivateData), reason: string(u.bytes(512))}
	return r, u.err
}

// DefaultDepth is the IRD and ORD a zero ConnParam asks for.
const DefaultDepth = provider.DefaultConnDepth

// offer fills a hello from a QP and its connection parameters, their zero
// fields filled as ConnParam.WithDefaults does.
func offer(qp *soft.QP, p provider.ConnParam) hello {
	p = p.WithDefaults(qp.Device().Caps())
	return hello{version: protoVersion, qpn: qp.QPN(), psn: soft.NewPSN(), pdata: p.PrivateData,
		ird: p.ResponderResources, ord: p.InitiatorDepth, retry: p.RetryCount, rnrRetry: p.RNRRetryCount}
}

// establishAttr is what a QP that sent mine and received peer's applies: its
// ORD never exceeds the peer's IRD.
func establishAttr(mine, peer hello) soft.EstablishAttr {
	return soft.EstablishAttr{
		DestQPN: peer.qpn, SQPSN: mine.psn, RQPSN: peer.psn, PathMTU: 4096,
		IRD: mine.ird, ORD: max(min(mine.ord, peer.ird), 1),
		RetryCnt: mine.retry, RNRRetry: mine.rnrRetry, Timeout: 14, MinRNRTime: 12,
	}
}

func checkPrivateData(pd []byte) error {
	return cmkit.CheckPrivateData("shm", pd, MaxPrivateData)
}
