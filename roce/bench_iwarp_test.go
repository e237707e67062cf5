//go:build roce_vs_iwarp

package roce_test

import (
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// With -tags roce_vs_iwarp the benchmarks also run over the iWARP
// transport, in the same run, as the targets are ratios to it.
func init() {
	benchTransports["iwarp"] = func() (*verbs.Device, error) { return verbs.Open(iwarp.New()) }
}
