package roce_test

import (
	"os"
	"testing"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/internal/leakcheck"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

func TestMain(m *testing.M) {
	open := func() (*verbs.Device, string, error) {
		o := roce.Options{Addr: "127.0.0.1:0"}
		if os.Getenv(cmEnv) == "ib" { // TestConformanceIBCrossProcess's child
			o.CM = roce.CMIB
		}
		d, err := verbs.Open(roce.New(o))
		return d, "127.0.0.1:0", err
	}
	maybeServeBenchPeer()
	maybeServeExitPeer()
	conformance.MaybeServePeer(open, conformance.WithCallHook(roce.RaceSync))
	leakcheck.Main(m)
}

// cmEnv tells a peer child process which connection manager to use.
const cmEnv = "GOVERBS_ROCE_TEST_CM"
