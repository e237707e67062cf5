package roce_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/internal/leakcheck"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

func TestMain(m *testing.M) {
	open := func() (*verbs.Device, string, error) {
		d, err := verbs.Open(roce.New(roce.Options{Addr: "127.0.0.1:0"}))
		return d, "127.0.0.1:0", err
	}
	maybeServeBenchPeer()
	maybeServeExitPeer()
	conformance.MaybeServePeer(open, conformance.WithCallHook(roce.RaceSync))
	leakcheck.Main(m)
}
