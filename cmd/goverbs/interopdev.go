package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"

	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// iwarpFlags select the iWARP device options of the interop commands.
type iwarpFlags struct {
	caps, crc, local, busyPoll, eager bool
}

func (f *iwarpFlags) register(fs *flag.FlagSet, localDefault bool) {
	fs.BoolVar(&f.caps, "caps", false, "send goverbs' capability block in the MPA private data (off for strict siw interop)")
	fs.BoolVar(&f.crc, "crc", false, "ask for the MPA CRC32c")
	fs.BoolVar(&f.local, "local-completion", localDefault, "complete SEND and WRITE when handed to TCP, as siw does, instead of once the peer placed them")
	fs.BoolVar(&f.busyPoll, "busy-poll", false, "spin on the sockets instead of parking in the netpoller")
}

// open opens the iWARP device; connections its listeners refuse before the
// application sees them are reported on stderr.
func (f *iwarpFlags) open(stderr io.Writer) (*verbs.Device, error) {
	refused := func(remote string, err error) { fmt.Fprintf(stderr, "goverbs: refused %s: %v\n", remote, err) }
	return verbs.Open(iwarp.New(iwarp.CapabilityBlock(f.caps), iwarp.CRC(f.crc), iwarp.WaitForInitiator(!f.eager),
		iwarp.LocalCompletion(f.local), iwarp.BusyPoll(f.busyPoll), iwarp.OnRefused(refused)))
}

// roceFlags select the RoCEv2 device of the interop commands.
type roceFlags struct {
	local string
	mtu   int
	// cmIB connects through the IB CM on QP1 (roce.CMIB), for rdma_cm
	// peers; set by the command, not a flag.
	cmIB bool
}

func (f *roceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.local, "local", "", "this side's `IP`: the RoCE device binds it (UDP 4791) and it is the GID sent to the peer (default: the address that routes to the peer)")
	fs.IntVar(&f.mtu, "mtu", 1024, "path `MTU` announced and used: 256 to 4096 (rxe on a 1500-byte link: 1024)")
}

// open opens the RoCEv2 device on the local IP (or the one routing to
// peer) and returns it with its GID. rxe's packets carry IP IDs that
// goverbs cannot rebuild, so their ICRC is not checked, and rxe sends from
// a UDP port of its own choosing.
func (f *roceFlags) open(peer string) (*verbs.Device, [16]byte, error) {
	var gid [16]byte
	ip, err := f.localIP(peer)
	if err != nil {
		return nil, gid, err
	}
	gid = ip.As16()
	o := roce.Options{Addr: ip.String(), PathMTU: verbs.MTU(f.mtu), ICRC: roce.ICRCIgnoreIPv4, AnyPeerPort: true}
	if f.cmIB {
		o.CM = roce.CMIB
	}
	dev, err := verbs.Open(roce.New(o))
	return dev, gid, err
}

// localIP is --local, or the source address the kernel picks toward peer.
func (f *roceFlags) localIP(peer string) (netip.Addr, error) {
	if f.local != "" {
		ip, err := netip.ParseAddr(f.local)
		if err != nil {
			return ip, &UsageError{Err: fmt.Errorf("--local: %v", err)}
		}
		return ip.Unmap(), nil
	}
	if peer == "" {
		return netip.Addr{}, &UsageError{Err: fmt.Errorf("a RoCE server needs --local IP (its GID)")}
	}
	c, err := net.Dial("udp4", net.JoinHostPort(peer, "4791")) // sends nothing
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}

// watchEvents prints the device's asynchronous events on w until the device
// is closed: a QP that fails reports why there (a Terminate sent or
// received, a protocol violation), where its flushed work requests cannot.
// The returned function waits for the last event to be printed; call it
// after closing the device.
func watchEvents(dev *verbs.Device, w io.Writer) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range dev.Events() {
			if ev.Err != nil {
				fmt.Fprintf(w, "goverbs: event %v on QP %#x: %v\n", ev.Type, ev.QPN, ev.Err)
			} else {
				fmt.Fprintf(w, "goverbs: event %v on QP %#x\n", ev.Type, ev.QPN)
			}
		}
	}()
	return func() { <-done }
}

// watchDevice is watchEvents for a command that uses dev to its end: the
// returned function closes dev, then waits for the last event.
func watchDevice(dev *verbs.Device, w io.Writer) (closeDev func()) {
	wait := watchEvents(dev, w)
	return func() {
		dev.Close()
		wait()
	}
}

// lockedWriter serialises the writes of the command and of watchEvents.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
