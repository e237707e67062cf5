//go:build cgo && rdmacore

package rdmacore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/rdmacore"
	"github.com/goverbs/goverbs/verbs"
)

// The kernel's rxe and siw (6.1) have no reg_user_mr_dmabuf: the backend
// passes ibv_reg_dmabuf_mr through and the refusal arrives as
// ErrNotSupported, the PD intact. (A device with dma-buf support, mlx5 for
// one, would reject this file instead: it is not a dma-buf.)
func TestRegisterDmabufOnSoftwareDevices(t *testing.T) {
	buf := testkit.NotDmabuf(t)
	for _, d := range devices(t) {
		t.Run(d.Name, func(t *testing.T) {
			p, err := rdmacore.New(d.Name)
			if err != nil {
				t.Fatal(err)
			}
			pd := testkit.Must(testkit.Open(t, p).AllocPD())(t)
			mr, err := pd.RegisterDmabuf(buf, verbs.AccessLocalWrite)
			if d.Caps.DataPath == verbs.DataPathSoftware && !errors.Is(err, verbs.ErrNotSupported) {
				t.Fatalf("RegisterDmabuf on %s = %v, %v; want ErrNotSupported", d.Name, mr, err)
			}
			if err == nil {
				t.Fatalf("RegisterDmabuf of a regular file on %s succeeded", d.Name)
			}
			if !strings.Contains(err.Error(), "ibv_reg_dmabuf_mr") {
				t.Errorf("the refusal did not come from the device (ibv_reg_dmabuf_mr): %v", err)
			}
			t.Logf("%s: %v", d.Name, err)
			if err := pd.Close(); err != nil {
				t.Fatalf("PD.Close after a refused registration: %v", err)
			}
		})
	}
}
