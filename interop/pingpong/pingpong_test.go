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

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/interop/internal/interoptest"
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

// A goverbs client and server over RoCEv2 on loopback, several sizes.
func TestClientServerRoCE(t *testing.T) {
	clientServer(t, false, 1, 1000, 4096, 65536)
}

// clientServer runs 200 iterations between a goverbs client and server
// over RoCEv2 on loopback for each size, UD queue pairs if ud.
func clientServer(t *testing.T, ud bool, sizes ...int) {
	for _, size := range sizes {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sdev, sgid := interoptest.OpenRoCE(t, "127.0.0.1")
			cdev, cgid := interoptest.OpenRoCE(t, "127.0.0.2")
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			done := make(chan error, 1)
			go func() {
				_, err := Serve(ctx, sdev, ln, Config{UD: ud, Size: size, Iters: 200, GID: sgid})
				done <- err
			}()
			r, err := Client(ctx, cdev, ln.Addr().String(), Config{UD: ud, Size: size, Iters: 200, GID: cgid})
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

// ibv_ud_pingpong's protocol between two goverbs devices over RoCEv2 on
// loopback: UD QPs, Q_Key 0x11111111, the GRH in front of every message
// (its source checked), sizes up to the MTU.
func TestClientServerUD(t *testing.T) {
	clientServer(t, true, 1, 1024)
}

// A UD message is one packet: more than the MTU is refused before any
// resource is made, as ud_pingpong.c does.
func TestUDSizeAboveMTU(t *testing.T) {
	c := Config{UD: true, Size: 2048, MTU: 1024}
	if err := c.normalize(); !errors.Is(err, ErrConfig) {
		t.Fatalf("normalize = %v, want ErrConfig", err)
	}
	c = Config{UD: true}
	if err := c.normalize(); err != nil || c.Size != DefaultUDSize {
		t.Fatalf("default UD size %d, %v", c.Size, err)
	}
}

// A UD receive must come from the peer's QP, with the peer's address in
// its GRH.
func TestUDChecksOrigin(t *testing.T) {
	dev, _ := interoptest.OpenRoCE(t, "127.0.0.1")
	s, err := newSide(dev, Config{UD: true, Size: 8, Iters: 1, RxDepth: 2, MTU: 1024}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.rem = dest{qpn: 0x42, gid: netip.MustParseAddr("::ffff:10.0.0.2").As16()}
	ib.PutGRH(s.buf.Bytes(), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.1"), 8, 0, 64)
	good := verbs.WorkCompletion{ByteLen: 8 + verbs.GRHLen, SrcQP: 0x42, Flags: verbs.WCWithGRH}
	if err := s.checkGRH(0, good); err != nil {
		t.Fatalf("good datagram refused: %v", err)
	}
	bad := good
	bad.SrcQP = 0x43
	var pe *ProtocolError
	if err := s.checkGRH(0, bad); !errors.As(err, &pe) {
		t.Fatalf("another QP accepted: %v", err)
	}
	ib.PutGRH(s.buf.Bytes(), netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("10.0.0.1"), 8, 0, 64)
	if err := s.checkGRH(0, good); !errors.As(err, &pe) {
		t.Fatalf("another source address accepted: %v", err)
	}
}
