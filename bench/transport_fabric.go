package bench

import (
	"github.com/goverbs/goverbs/fabric"
	"github.com/goverbs/goverbs/provider"
)

// fabric is registered in every build: without cgo and the libfabric tag
// its constructor fails with an error that says so, which goverbs info
// shows.
func init() {
	register(Transport{
		Name: "fabric",
		Summary: "libfabric (cgo, build tag libfabric): --transport fabric:SPEC, e.g. fabric:tcp, " +
			"fabric:verbs?domain=mlx5_0; default tcp",
		Reach:      ReachNetwork,
		New:        newFabric,
		ListenAddr: tcpAddr,
	})
}

// newFabric opens n providers of the libfabric provider spec (tcp when
// empty).
func newFabric(n int, _ string, o Open) ([]provider.Provider, error) {
	spec := o.Arg
	if spec == "" {
		spec = "tcp"
	}
	return times(n, func() (*fabric.Provider, error) { return fabric.New(spec) })
}
