package bench

import (
	"testing"

	"github.com/goverbs/goverbs/internal/leakcheck"
)

// TestMain fails the tests if a run leaves goroutines behind: every
// session, listener, connection and worker must end with its run.
func TestMain(m *testing.M) { leakcheck.Main(m) }
