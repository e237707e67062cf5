// Package wiretest holds the checks that the tests of the wire codecs, ib
// and iw, share.
package wiretest

import "testing"

// View is a fixed-size header view under test: its name, its size and its
// IsValid.
type View struct {
	Name  string
	Size  int
	Valid func([]byte) bool
}

// ViewOf is the View of type V, whose IsValid must accept size bytes.
func ViewOf[V interface {
	~[]byte
	IsValid() bool
}](name string, size int) View {
	return View{name, size, func(b []byte) bool { return V(b).IsValid() }}
}

// CheckPrefixes fails the test for each view that rejects a zeroed buffer
// of its size or accepts any of its proper prefixes.
func CheckPrefixes(tb testing.TB, views ...View) {
	tb.Helper()
	for _, v := range views {
		b := make([]byte, v.Size)
		if !v.Valid(b) {
			tb.Errorf("%s: IsValid false with its full %d bytes", v.Name, v.Size)
		}
		for i := range b {
			if v.Valid(b[:i]) {
				tb.Errorf("%s: IsValid true with %d of %d bytes", v.Name, i, v.Size)
			}
		}
	}
}
