package perftest_test

import (
	"testing"

	"goverbs/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
