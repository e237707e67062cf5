package bench

import (
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/shm"
)

func init() {
	register(Transport{
		Name:    "shm",
		Summary: "same-host shared memory (memfd rings, one-sided copies by the initiator), set up over a Unix socket",
		Engines: 1,
		Reach:   ReachHost,
		CPUNote: "shared memory: a one-sided WRITE or READ is a copy by the initiator's CPU, " +
			"the remote CPU does nothing for it (a SEND is served by the receiver's engine)",
		New:        each(func(string, Open) provider.Provider { return shm.New(shm.Options{}) }),
		ListenAddr: anyAddr,
	})
}
