//go:build !cgo || !rdmacore

package rdmacore_test

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/rdmacore"
	"github.com/goverbs/goverbs/verbs"
)

// TestStub: without cgo and the rdmacore tag every entry point says the
// backend is not built, with an error matching ErrNotSupported.
func TestStub(t *testing.T) {
	if _, err := rdmacore.New("rxe0"); !errors.Is(err, verbs.ErrNotSupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("New: %v, want ErrNotSupported", err)
	}
	if _, err := rdmacore.Devices(); !errors.Is(err, verbs.ErrNotSupported) {
		t.Fatalf("Devices: %v", err)
	}
}
