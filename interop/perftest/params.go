package perftest

import (
	"fmt"
	"strings"

	"github.com/goverbs/goverbs/verbs"
)

// Test is one of perftest's six RC tests.
type Test uint8

// The tests, by perftest's binary names.
const (
	WriteLat Test = iota + 1 // ib_write_lat
	WriteBW                  // ib_write_bw
	ReadLat                  // ib_read_lat
	ReadBW                   // ib_read_bw
	SendLat                  // ib_send_lat
	SendBW                   // ib_send_bw
)

var testNames = [...]string{"", "write_lat", "write_bw", "read_lat", "read_bw", "send_lat", "send_bw"}

func (t Test) String() string {
	if int(t) < len(testNames) && t != 0 {
		return testNames[t]
	}
	return fmt.Sprintf("Test(%d)", uint8(t))
}

// ParseTest accepts "write_lat", "ib_write_lat" or goverbs bench's
// "write-lat".
func ParseTest(s string) (Test, error) {
	s = strings.ReplaceAll(strings.TrimPrefix(s, "ib_"), "-", "_")
	for i, n := range testNames {
		if n != "" && n == s {
			return Test(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown test %q (write_lat, write_bw, read_lat, read_bw, send_lat, send_bw)", ErrConfig, s)
}

// Latency reports whether t is a latency test.
func (t Test) Latency() bool { return t == WriteLat || t == ReadLat || t == SendLat }

// Verb is the operation the test measures.
func (t Test) Verb() verbs.Opcode {
	switch t {
	case WriteLat, WriteBW:
		return verbs.OpWrite
	case ReadLat, ReadBW:
		return verbs.OpRead
	}
	return verbs.OpSend
}

// Defaults, as perftest_parameters.h and .c set them.
const (
	DefaultPort     = 18515
	defSizeBW       = 65536
	defSizeLat      = 2
	defIters        = 1000
	defItersWriteBW = 5000
	defTxBW         = 128
	defRxSend       = 512
	defCQMod        = 100
	cqModSizeLimit  = 8192 // MSG_SIZE_CQ_MOD_LIMIT: above it every WR is signalled
	// CycleBuffer and CacheLine are what goverbs announces for perftest's
	// page size and cache line; both sides use the larger of the two.
	CycleBuffer = 4096
	CacheLine   = 64
	// Version is the perftest version goverbs claims: the one the lab's
	// Debian binaries exchange. It selects the message sizes that follow
	// (2-byte MTU, 8-byte iteration counts).
	Version = "6.06"
	// maxOutReads is what perftest uses for READ tests without -o: the
	// device's max_qp_rd_atom, 128 on both siw and rxe.
	maxOutReads = 128
)

// Config is one side's run. Both sides must be started with the same
// test, size and iterations: perftest does not exchange them.
type Config struct {
	Test  Test
	Size  int // bytes per message; 0: 2 for latency tests, 65536 for bandwidth
	Iters int // 0: 1000 (5000 for write_bw)
	// TxDepth is how many operations a bandwidth client keeps in flight
	// (perftest -t, 128); CQMod signals one in CQMod (-Q, 100, 1 above 8
	// KiB); RxDepth is how many receives a SEND receiver keeps posted
	// (-r, 512). OutReads is the READ depth (-o, 128). Zero means
	// perftest's default, adjusted to Iters as perftest adjusts it.
	TxDepth, CQMod, RxDepth, OutReads int
	// CM selects perftest's -R: the exchange runs over an rdma_cm (here:
	// the transport's connection manager) connection, and the data QP is
	// connected by a second one. Required over iWARP. Without it the
	// exchange runs over TCP and the data QP is connected by hand
	// (Modify to RTR and RTS with the peer's GID, QPN and PSN): RoCE.
	CM bool
	// GID is this side's GID for the TCP exchange: the IPv4-mapped address
	// the peer's RoCE device sends to. Ignored with CM.
	GID [16]byte
	// MTU is this side's port MTU, announced in the exchange; the data QP
	// uses the smaller of the two. Zero: the device's Caps.PathMTU.
	MTU verbs.MTU
	// Credits makes SEND bandwidth use perftest's iWARP credits (the
	// receiver RDMA WRITEs its receive count to the sender): perftest
	// does so on iWARP devices, where a SEND finding no receive is fatal.
	Credits bool
	// Spin polls CQs and memory without parking.
	Spin bool
}

// normalize applies perftest's defaults and dependencies
// (force_dependecies in perftest_parameters.c).
func (c *Config) normalize() error {
	if c.Test < WriteLat || c.Test > SendBW {
		return fmt.Errorf("%w: no test", ErrConfig)
	}
	if c.Size == 0 {
		c.Size = defSizeBW
		if c.Test.Latency() {
			c.Size = defSizeLat
		}
	}
	if c.Iters == 0 {
		c.Iters = defIters
		if c.Test == WriteBW {
			c.Iters = defItersWriteBW
		}
	}
	if c.Size < 1 || c.Iters < 1 || (c.Test == WriteLat && c.Iters < 2) {
		return fmt.Errorf("%w: size %d, iterations %d", ErrConfig, c.Size, c.Iters)
	}
	c.defaultDepths()
	return nil
}

func (c *Config) defaultDepths() {
	if c.TxDepth == 0 {
		c.TxDepth = 1
		if !c.Test.Latency() {
			c.TxDepth = defTxBW
		}
	}
	c.TxDepth = min(c.TxDepth, c.Iters)
	if c.RxDepth == 0 {
		c.RxDepth = 1
		if c.Test.Verb() == verbs.OpSend {
			c.RxDepth = defRxSend
		}
	}
	if c.Test.Verb() == verbs.OpSend {
		c.RxDepth = min(c.RxDepth, c.Iters)
		c.RxDepth += c.RxDepth % 2 // perftest's "WA for a bug when rx_depth is odd in SEND"
	}
	if c.CQMod == 0 {
		c.CQMod = defCQMod
		if c.Size > cqModSizeLimit || c.Test.Latency() {
			c.CQMod = 1
		}
	}
	c.CQMod = min(c.CQMod, c.TxDepth)
	if c.OutReads == 0 {
		c.OutReads = 1
		if c.Test.Verb() == verbs.OpRead {
			c.OutReads = maxOutReads
		}
	}
}

// inlineSize is perftest's default -I: latency tests of WRITE and SEND
// post messages up to 220 and 236 bytes inline (DEF_INLINE_WRITE,
// DEF_INLINE_SEND_RC_UC in perftest_parameters.h), bandwidth tests and
// READ none; never more than the device grants.
func (c *Config) inlineSize(devMax uint32) int {
	n := 0
	switch {
	case !c.Test.Latency():
	case c.Test.Verb() == verbs.OpWrite:
		n = 220
	case c.Test.Verb() == verbs.OpSend:
		n = 236
	}
	return min(n, int(devMax))
}

// buffSize is perftest's BUFF_SIZE: each half of the data buffer, and the
// extent the peer may reach from the advertised address.
func (c *Config) buffSize(cycle int) int { return max(c.Size, cycle) }
