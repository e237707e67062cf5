package roce_test

import (
	"github.com/goverbs/goverbs/internal/faultnet"
	"github.com/goverbs/goverbs/roce"
)

// faultConn puts the shared fault seam (internal/faultnet) at the device's
// socket: every datagram the device writes goes through its plan.
type faultConn struct {
	roce.PacketConn
	*faultnet.Datagrams
}

func newFaultConn(c roce.PacketConn, decide func(int) faultnet.Fault) *faultConn {
	f := &faultConn{PacketConn: c}
	f.Datagrams = faultnet.NewDatagrams(decide, func(ps []faultnet.Packet) {
		ms := make([]roce.Message, len(ps))
		for i, p := range ps {
			ms[i] = roce.Message{Buffers: [][]byte{p.B}, Addr: p.Addr}
		}
		c.WriteBatch(ms)
	})
	return f
}

// Offload is false: faults apply to single datagrams, not GSO runs.
func (f *faultConn) Offload() bool { return false }

func (f *faultConn) WriteBatch(ms []roce.Message) (int, error) {
	ps := make([]faultnet.Packet, len(ms))
	for i := range ms {
		ps[i] = faultnet.Packet{B: flatten(ms[i].Buffers), Addr: ms[i].Addr}
	}
	f.Datagrams.Write(ps)
	return len(ms), nil
}

func (f *faultConn) Close() error {
	f.Datagrams.Close()
	return f.PacketConn.Close()
}

func flatten(bufs [][]byte) []byte {
	var b []byte
	for _, p := range bufs {
		b = append(b, p...)
	}
	return b
}
