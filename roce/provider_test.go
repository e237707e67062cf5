package roce_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// Two devices on one address: the second fails with ErrBusy and an error
// that says what to do.
func TestSecondDeviceOnPortSaysWhatToDo(t *testing.T) {
	p := roce.New(roce.Options{Addr: "127.0.0.1:0"})
	first := testkit.Must(verbs.Open(p))(t)
	defer first.Close()
	addr := testkit.Must(p.Addr())(t)
	_, err := verbs.Open(roce.New(roce.Options{Addr: addr.String()}))
	if !errors.Is(err, verbs.ErrBusy) || !strings.Contains(err.Error(), "port 0") ||
		!strings.Contains(err.Error(), `roce.Options{Addr: "127.0.0.1:0"}`) {
		t.Fatalf("second device on %s: %v; want ErrBusy saying how to pick another port", addr, err)
	}
}

// Options later in New's list override earlier ones.
func TestOptionsOverride(t *testing.T) {
	p := roce.New(roce.Options{Addr: "127.0.0.2:1"}, roce.Options{Addr: "127.0.0.1:0"})
	dev := testkit.Must(verbs.Open(p))(t)
	defer dev.Close()
	if a, _ := p.Addr(); a.Addr().String() != "127.0.0.1" {
		t.Errorf("device bound %v, want the last option's 127.0.0.1", a)
	}
}
