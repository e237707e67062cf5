package conformance

import (
	"flag"
	"strings"
	"testing"
)

// Gaps is a transport's skip list for RunGaps: the items of the suite its
// provider or device cannot show, by name, each with the reason. The
// reasons stay with the transport's tests, which know them.
type Gaps struct {
	// Name names the list in the error for an item the suite does not
	// have: the spec, the transport.
	Name string
	// Whose is whose gap a skip says it is: "provider", "device".
	Whose string
	// Why maps each item to skip to the reason.
	Why map[string]string
	// Force names items of Why to run anyway: to re-check by hand that a
	// listed gap is still there.
	Force []string
}

// RunGaps runs the suite as Run does, skipping the items g names with
// their reasons, and checks afterwards that every item g names is one the
// suite ran: a renamed item would otherwise stop being skipped or tested.
// The check is left out when -run chose items of the suite (the others
// were not meant to run) and in -short mode, where some items skip before
// they build an Env.
func RunGaps(t *testing.T, g Gaps, newEnv NewEnv) {
	t.Helper()
	force := map[string]bool{}
	for _, item := range g.Force {
		force[item] = true
	}
	seen := map[string]bool{}
	run(t, func(t *testing.T, item string) *Env {
		seen[item] = true
		if why, ok := g.Why[item]; ok && !force[item] {
			t.Skipf("%s gap, not a failure of ours: %s", g.Whose, why)
		}
		return newEnv(t)
	})
	if itemsChosen(t) || testing.Short() {
		return
	}
	for item := range g.Why {
		if !seen[item] {
			t.Errorf("the skip list of %s names %q, which the suite does not run", g.Name, item)
		}
	}
}

// itemsChosen reports whether -run names items of the suite that t runs,
// a part at their level (TestConformanceTCP/Read under TestConformanceTCP,
// TestConformance/rxe0/Read under TestConformance/rxe0), not only t or
// the tests above it (TestConformance/rxe0$, TestConformance/rxe0/).
func itemsChosen(t *testing.T) bool {
	f := flag.Lookup("test.run")
	if f == nil {
		return false
	}
	level := strings.Count(t.Name(), "/") + 1
	for _, alt := range strings.Split(f.Value.String(), "|") {
		if parts := strings.SplitN(alt, "/", level+1); len(parts) == level+1 && parts[level] != "" {
			return true
		}
	}
	return false
}
