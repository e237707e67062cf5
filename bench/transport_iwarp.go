package bench

import (
	"goverbs/iwarp"
	"goverbs/provider"
)

func init() {
	register(Transport{
		Name:       "iwarp",
		Summary:    "iWARP over TCP (MPA/DDP/RDMAP, siw-compatible wire)",
		Reach:      ReachNetwork,
		New:        each(func(string) provider.Provider { return iwarp.New() }),
		ListenAddr: tcpAddr,
	})
}
