package bench

import (
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/provider"
)

func init() {
	register(Transport{
		Name:    "iwarp",
		Summary: "iWARP over TCP (MPA/DDP/RDMAP, siw-compatible wire)",
		// Busy-polling, the receive goroutine parks while the run
		// polls: the pollers read the sockets (iwarp's drive_poll.go).
		Engines: 0,
		Reach:   ReachNetwork,
		New: each(func(_ string, o Open) provider.Provider {
			return iwarp.New(iwarp.BusyPoll(o.BusyPoll))
		}),
		ListenAddr: tcpAddr,
	})
}
