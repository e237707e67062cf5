package bench

import (
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/rdmacore"
)

// verbs is registered in every build: without cgo and the rdmacore tag its
// constructor fails with an error that says so, which goverbs info shows.
func init() {
	register(Transport{
		Name: "verbs",
		Summary: "a verbs device through rdma-core (cgo, build tag rdmacore): --transport verbs:DEV, " +
			"e.g. verbs:rxe0, verbs:siw0, verbs:mlx5_0; default the first active device",
		Reach: ReachNetwork,
		New:   newVerbs,
		// The device listens on its own address (the host the peer
		// reaches this process by may be another interface's).
		ListenAddr: func(string, string) string { return ":0" },
	})
}

// newVerbs opens n providers of the verbs device o.Arg (the first active
// device with an address when empty).
func newVerbs(n int, _ string, o Open) ([]provider.Provider, error) {
	name := o.Arg
	if name == "" {
		ds, err := rdmacore.Devices()
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			if d.Error == "" && d.PortActive && len(d.Addrs) > 0 {
				name = d.Name
				break
			}
		}
	}
	return times(n, func() (*rdmacore.Provider, error) { return rdmacore.New(name) })
}
