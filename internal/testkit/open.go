package testkit

import (
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

// Open opens a device on p for the test and closes it when the test ends;
// a failure to open ends the test.
func Open(t testing.TB, p verbs.Provider) *verbs.Device {
	t.Helper()
	d, err := verbs.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
