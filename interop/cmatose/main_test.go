package cmatose

import (
	"testing"

	"github.com/goverbs/goverbs/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
