//go:build !cgo || !libfabric

package fabric_test

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/fabric"
	"github.com/goverbs/goverbs/verbs"
)

// TestStub: without cgo and the libfabric tag every entry point says the
// backend is not built, with an error matching ErrNotSupported.
func TestStub(t *testing.T) {
	if _, err := fabric.New("tcp"); !errors.Is(err, verbs.ErrNotSupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("New: %v, want ErrNotSupported", err)
	}
	if _, err := fabric.NewSpec(fabric.Spec{Provider: "tcp"}); !errors.Is(err, verbs.ErrNotSupported) {
		t.Fatalf("NewSpec: %v", err)
	}
	if _, err := fabric.Providers(); !errors.Is(err, verbs.ErrNotSupported) {
		t.Fatalf("Providers: %v", err)
	}
	if _, err := fabric.New("tcp?colour=red"); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("bad spec: %v, want ErrInvalidArgument first", err)
	}
}
