package conformance

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// Peer is side B of a conformance test: a device the suite drives through
// handles, so that B may live in this process (LocalPeer) or in another one
// (a transport's test re-executes itself and serves a Peer over a pipe).
// Every method is safe for concurrent use.
type Peer interface {
	Caps() verbs.Caps
	// Listen starts listening and returns the address A dials.
	Listen() (string, error)
	// Accept answers the next connection request: with a new QP of cfg
	// (reply.Reject false), or a rejection. It returns the QP's handle
	// and the initiator's private data.
	Accept(ctx context.Context, cfg QPConfig, reply Reply) (Accepted, error)
	// RegMR allocates and registers size bytes, zero-filled.
	RegMR(spec MRSpec) (MRInfo, error)
	DeregMR(mr int) error
	WriteMem(mr, off int, b []byte) error
	ReadMem(mr, off, n int) ([]byte, error)
	PostRecv(qp int, wrs []verbs.RecvWR) error
	PostSend(qp int, wrs []verbs.SendWR) error
	// Poll waits up to timeout for n completions of the QP's CQ and
	// returns those it got.
	Poll(qp, n int, timeout time.Duration) ([]verbs.WorkCompletion, error)
	// PollThenClose waits up to timeout for n completions of the QP's CQ
	// and, the moment it has them (or the wait ended), closes the QP and
	// then the whole peer, device included, as a server that exits on its
	// last message. The peer is closed afterwards whatever the result.
	PollThenClose(qp, n int, timeout time.Duration) ([]verbs.WorkCompletion, error)
	Query(qp int) (verbs.QPAttr, error)
	Modify(qp int, attr verbs.QPAttr, mask verbs.AttrMask) error
	Disconnect(qp int) error
	CloseQP(qp int) error
	// Kill makes the peer vanish as a crashed process would: its device
	// goes away without a goodbye where the transport allows.
	Kill() error
	Close() error
}

// QPConfig describes a QP (and its CQ) the peer creates.
type QPConfig struct {
	Cap       verbs.QPCap
	CQEntries int
	// Access, if not zero, are the QP's access flags (the QP is moved to
	// INIT with them before it accepts).
	Access verbs.Access
	// PD selects the protection domain by index (0 is the peer's default
	// PD, 1 a second one).
	PD int
}

// Reply is how the peer answers a connection request.
type Reply struct {
	Reject      bool
	PrivateData []byte
	Param       verbs.ConnParam
}

// Accepted describes an accepted connection.
type Accepted struct {
	QP          int
	QPN         uint32
	PrivateData []byte
	Info        verbs.ConnInfo
}

// MRSpec describes memory the peer registers.
type MRSpec struct {
	Size   int
	Access verbs.Access
	// PD selects the protection domain (see QPConfig.PD).
	PD int
	// File backs the region with a file (for FLUSH to persistence).
	File bool
}

// MRInfo describes a peer region.
type MRInfo struct {
	ID     int
	Addr   uint64
	Len    int
	LKey   uint32
	RKey   uint32
	Remote verbs.RemoteBuf
}

// LocalPeer is a Peer over a device in this process.
type LocalPeer struct {
	Dev *verbs.Device
	// Addr is the address Listen listens on: a name for loopback,
	// "127.0.0.1:0" for TCP.
	Addr string
	// Dir holds file-backed regions.
	Dir string
	// Memfd registers regions over mem.Alloc memory (memfd-backed on
	// Linux, so a same-host peer can map them) instead of Go memory.
	Memfd bool

	mu   sync.Mutex
	pds  []*verbs.PD
	mrs  map[int]*localMR
	qps  map[int]*localQP
	next int
	ln   *verbs.Listener
}

type localMR struct {
	mr  *verbs.MR
	mem interface{ Close() error }
}

type localQP struct {
	qp *verbs.QP
	cq *verbs.CQ
}

// LocalEnv is the Env of a suite run with both devices in this process:
// a (which the caller closes) against a LocalPeer over a device of b
// listening on addr, closed, with its device, when the test ends.
func LocalEnv(t *testing.T, a *verbs.Device, b verbs.Provider, addr string) *Env {
	t.Helper()
	dev, err := verbs.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	peer := NewLocalPeer(dev, addr, t.TempDir())
	t.Cleanup(func() { peer.Close() })
	return &Env{A: a, B: peer}
}

// NewLocalPeer returns a Peer over dev that listens on addr; dir is a
// directory for file-backed regions.
func NewLocalPeer(dev *verbs.Device, addr, dir string) *LocalPeer {
	return &LocalPeer{Dev: dev, Addr: addr, Dir: dir, mrs: make(map[int]*localMR), qps: make(map[int]*localQP)}
}

func (p *LocalPeer) Caps() verbs.Caps { return p.Dev.Caps() }

func (p *LocalPeer) pd(i int) (*verbs.PD, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.pds) <= i {
		pd, err := p.Dev.AllocPD()
		if err != nil {
			return nil, err
		}
		p.pds = append(p.pds, pd)
	}
	return p.pds[i], nil
}

func (p *LocalPeer) id() int {
	p.next++
	return p.next
}

func (p *LocalPeer) qp(id int) (*localQP, error) { return lookup(p, &p.qps, "QP", id) }

func (p *LocalPeer) mr(id int) (*localMR, error) { return lookup(p, &p.mrs, "MR", id) }

// lookup finds the peer's object id in *table, one of p's tables: the
// field is read under p.mu, for Close replaces the tables.
func lookup[T any](p *LocalPeer, table *map[int]T, kind string, id int) (T, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := (*table)[id]
	if !ok {
		return v, fmt.Errorf("conformance: no peer %s %d", kind, id)
	}
	return v, nil
}
