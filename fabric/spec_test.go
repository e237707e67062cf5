package fabric

import (
	"errors"
	"syscall"
	"testing"

	"github.com/goverbs/goverbs/provider"
)

func TestParseSpec(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Spec
		text string
	}{
		{"tcp", Spec{Provider: "tcp"}, "fabric:tcp"},
		{"fabric:tcp", Spec{Provider: "tcp"}, "fabric:tcp"},
		{"fabric:verbs;ofi_rxm", Spec{Provider: "verbs;ofi_rxm"}, "fabric:verbs;ofi_rxm"},
		{"verbs?domain=mlx5_0", Spec{Provider: "verbs", Domain: "mlx5_0"}, "fabric:verbs?domain=mlx5_0"},
		{"tcp?fabric=127.0.0.1/32&completion=transmit", Spec{Provider: "tcp", Fabric: "127.0.0.1/32", Completion: CompletionTransmit},
			"fabric:tcp?completion=transmit&fabric=127.0.0.1%2F32"},
	} {
		got, err := ParseSpec(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			continue
		}
		if s := got.String(); s != c.text {
			t.Errorf("String of %q = %q, want %q", c.in, s, c.text)
		}
		if again, err := ParseSpec(got.String()); err != nil || again != got {
			t.Errorf("round trip of %q: %+v, %v", c.in, again, err)
		}
	}
	for _, bad := range []string{"", "fabric:", "tcp?domain", "tcp?domain=a&domain=b", "tcp?colour=red",
		"tcp?completion=sometimes", "a b", "tcp?domain=%zz"} {
		if _, err := ParseSpec(bad); !errors.Is(err, provider.ErrInvalidArgument) {
			t.Errorf("ParseSpec(%q): %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func TestIsHardware(t *testing.T) {
	for name, hw := range map[string]bool{
		"verbs": true, "verbs;ofi_rxm": true, "efa": true, "cxi": true, "psm2": true, "psm3": true, "opx": true,
		"tcp": false, "tcp;ofi_rxm": false, "udp;ofi_rxd": false, "sockets": false, "shm": false, "net": false,
	} {
		if IsHardware(name) != hw {
			t.Errorf("IsHardware(%q) = %v, want %v", name, !hw, hw)
		}
	}
}

// TestErrorMatchesBothWays: an Error matches its verbs class, its Errno and
// the syscall.Errno; libfabric's own numbers match no syscall.Errno.
func TestErrorMatchesBothWays(t *testing.T) {
	err := error(&Error{Op: "fi_mr_reg", Errno: Errno(syscall.EBUSY), Class: Errno(syscall.EBUSY).Class()})
	for _, target := range []error{provider.ErrBusy, syscall.EBUSY, Errno(syscall.EBUSY)} {
		if !errors.Is(err, target) {
			t.Errorf("%v does not match %v", err, target)
		}
	}
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, provider.ErrInvalidArgument) {
		t.Errorf("%v matches EINVAL", err)
	}
	trunc := error(&Error{Op: "x", Errno: ETRUNC})
	if !errors.Is(trunc, ETRUNC) || errors.Is(trunc, syscall.Errno(ETRUNC)) {
		t.Errorf("ETRUNC: %v", trunc)
	}
	if got := ETRUNC.Error(); got != "truncation error" {
		t.Errorf("ETRUNC text %q", got)
	}
	if got := Errno(syscall.ECONNREFUSED).Class(); got != provider.ErrRejected {
		t.Errorf("ECONNREFUSED class %v", got)
	}
	var e *Error
	if !errors.As(opErr("fi_connect", Errno(syscall.ETIMEDOUT)), &e) || !errors.Is(e, provider.ErrTimeout) {
		t.Errorf("opErr: %v", e)
	}
}

func TestCompletionStatus(t *testing.T) {
	for _, c := range []struct {
		e    Errno
		recv bool
		want provider.Status
	}{
		{Errno(syscall.ECANCELED), false, provider.StatusWRFlushErr},
		{Errno(syscall.ECANCELED), true, provider.StatusWRFlushErr},
		{ETRUNC, true, provider.StatusLocLenErr},
		{ETRUNC, false, provider.StatusRemInvReqErr},
		{Errno(syscall.EACCES), false, provider.StatusRemAccessErr},
		{ENOKEY, false, provider.StatusRemAccessErr},
		{Errno(syscall.EACCES), true, provider.StatusLocProtErr},
		{Errno(syscall.EINVAL), false, provider.StatusRemInvReqErr},
		{Errno(syscall.ENOTCONN), false, provider.StatusWRFlushErr},
		{Errno(syscall.EIO), false, provider.StatusWRFlushErr},
		{Errno(syscall.ETIMEDOUT), false, provider.StatusRetryExcErr},
		{ENORX, false, provider.StatusRNRRetryExcErr},
		{EOTHER, false, provider.StatusGeneralErr},
	} {
		if got := completionStatus(c.e, c.recv); got != c.want {
			t.Errorf("completionStatus(%v, recv %v) = %v, want %v", c.e, c.recv, got, c.want)
		}
	}
}
