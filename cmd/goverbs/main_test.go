package main

import (
	"testing"

	"goverbs/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
