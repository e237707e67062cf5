package pingpong

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// The address message as ibv_rc_pingpong wrote it in the lab
// (docs/interop.md §2.1).
func TestWireMatchesRcPingpong(t *testing.T) {
	d := dest{qpn: 0x12, psn: 0x1c6e9a, gid: netip.MustParseAddr("::ffff:10.77.2.1").As16()}
	want := "0000:000012:1c6e9a:00000000000000000000ffff0a4d0201\x00"
	if got := d.wire(); string(got) != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	back, err := parseDest([]byte(want))
	if err != nil || back != d {
		t.Fatalf("parse: %+v, %v", back, err)
	}
	if _, err := parseDest(bytes.Repeat([]byte("x"), msgSize)); err == nil {
		t.Fatal("garbage parsed")
	}
}

func TestRcFill(t *testing.T) {
	b := bytes.Repeat([]byte{fill}, 3*page)
	if _, ok := rcFill(b); !ok {
		t.Fatal("plain fill refused")
	}
	b[page] = 0
	if _, ok := rcFill(b); !ok {
		t.Fatal("-c's page zero refused")
	}
	b[page+1] = 0
	if j, ok := rcFill(b); ok || j != page+1 {
		t.Fatalf("a zero inside a page accepted (%d, %v)", j, ok)
	}
}

// openRoCE opens a RoCE device on a loopback address of its own, port
// 4791, as rxe's peers must be.
func openRoCE(t *testing.T, ip string) (*verbs.Device, [16]byte) {
	t.Helper()
	dev, err := verbs.Open(roce.New(roce.Options{Addr: ip, PathMTU: 1024}))
	if err != nil {
		t.Skipf("no RoCE device on %s: %v", ip, err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev, netip.MustParseAddr(ip).As16()
}

// A goverbs client and server over RoCEv2 on loopback, several sizes.
func TestClientServerRoCE(t *testing.T) {
	for _, size := range []int{1, 1000, 4096, 65536} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sdev, sgid := openRoCE(t, "127.0.0.1")
			cdev, cgid := openRoCE(t, "127.0.0.2")
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			done := make(chan error, 1)
			go func() {
				_, err := Serve(ctx, sdev, ln, Config{Size: size, Iters: 200, GID: sgid})
				done <- err
			}()
			r, err := Client(ctx, cdev, ln.Addr().String(), Config{Size: size, Iters: 200, GID: cgid})
			if serr := <-done; err != nil || serr != nil {
				t.Fatalf("client: %v; server: %v", err, serr)
			}
			if r.Iters != 200 {
				t.Fatalf("%d iterations", r.Iters)
			}
		})
	}
}

// A server checks what it receives.
func TestServerRejectsBadData(t *testing.T) {
	err := (&side{cfg: Config{Size: 8}, client: false}).checkBytes(0, []byte{fill, 1, fill, fill, fill, fill, fill, fill})
	var de *DataError
	if !errors.As(err, &de) || de.Offset != 1 {
		t.Fatalf("%v", err)
	}
}
