package verbs_test

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/loopback"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// The software transports have no device that could reach an exporter's
// memory: RegisterDmabuf refuses, never copies behind the user's back, and
// leaves the PD as it was.
func TestRegisterDmabufRefusedBySoftwareTransports(t *testing.T) {
	d := testkit.NotDmabuf(t)
	providers := map[string]verbs.Provider{"loopback": loopback.New(), "iwarp": iwarp.New(), "roce": roce.New()}
	for name, p := range providers {
		t.Run(name, func(t *testing.T) {
			pd := testkit.Must(testkit.Open(t, p).AllocPD())(t)
			mr, err := pd.RegisterDmabuf(d, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
			if !errors.Is(err, verbs.ErrNotSupported) || mr != nil {
				t.Fatalf("RegisterDmabuf = %v, %v; want ErrNotSupported", mr, err)
			}
			if !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("%v does not match errors.ErrUnsupported", err)
			}
			if err := pd.Close(); err != nil {
				t.Fatalf("PD.Close after a refused registration: %v", err)
			}
		})
	}
}

// Arguments no device could take are refused before any device sees them.
func TestRegisterDmabufInvalidArguments(t *testing.T) {
	pd := testkit.Must(testkit.Open(t, loopback.New()).AllocPD())(t)
	defer pd.Close()
	for _, tc := range []struct {
		name   string
		d      verbs.Dmabuf
		access verbs.Access
	}{
		{"negative fd", verbs.Dmabuf{FD: -1, Length: 4096}, verbs.AccessLocalWrite},
		{"empty", verbs.Dmabuf{FD: 0, Length: 0}, verbs.AccessLocalWrite},
		{"offset wraps", verbs.Dmabuf{FD: 0, Offset: ^uint64(0), Length: 2}, verbs.AccessLocalWrite},
		{"IOVA wraps", verbs.Dmabuf{FD: 0, IOVA: ^uint64(0) - 1, Length: 4096}, verbs.AccessLocalWrite},
		{"unknown right", verbs.Dmabuf{FD: 0, Length: 4096}, verbs.Access(1 << 30)},
	} {
		if _, err := pd.RegisterDmabuf(tc.d, tc.access); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("%s: RegisterDmabuf = %v; want ErrInvalidArgument", tc.name, err)
		}
	}
}
