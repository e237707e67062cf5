package bench

import (
	"net"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/roce"
)

func init() {
	register(Transport{
		Name:    "roce",
		Summary: "RoCEv2 over UDP in user space (rxe-compatible wire), connection manager over TCP",
		Engines: 0, // parks in the netpoller: no busy-poll mode
		Reach:   ReachNetwork,
		// A RoCE device's IP is its GID: it binds the address the peer
		// reaches this process by, on a free port.
		New: each(func(host string, _ Open) provider.Provider {
			return roce.New(roce.Options{Addr: net.JoinHostPort(host, "0")})
		}),
		ListenAddr: tcpAddr,
	})
	// The same device connected through the InfiniBand CM on QP1, as
	// rdma_cm peers connect: to weigh the IB CM against the side channel
	// (setup above all) in the same run.
	register(Transport{
		Name:    "roce-ibcm",
		Summary: "RoCEv2 over UDP in user space, connected through the InfiniBand CM on QP1 (rdma_cm's wire)",
		Reach:   ReachNetwork,
		New: each(func(host string, _ Open) provider.Provider {
			return roce.New(roce.Options{Addr: net.JoinHostPort(host, "0"), CM: roce.CMIB})
		}),
		ListenAddr: tcpAddr,
	})
}
