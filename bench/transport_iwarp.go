package bench

import (
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/provider"
)

func init() {
	register(Transport{
		Name:    "iwarp",
		Summary: "iWARP over TCP (MPA/DDP/RDMAP, siw-compatible wire)",
		Engines: 1,
		Reach:   ReachNetwork,
		New: each(func(_ string, o Open) provider.Provider {
			return iwarp.New(iwarp.BusyPoll(o.BusyPoll))
		}),
		ListenAddr: tcpAddr,
	})
}
