// Package loopback is the in-process link of the soft RDMA device: QPs of
// one process connected without sockets, the role UCX's "self" transport and
// rxe's loopback play. It is goverbs' reference semantics and its fastest
// test bed.
//
// Work runs on the goroutine that posts it: PostSend executes a WRITE, READ,
// atomic or FLUSH directly against the peer QP's memory (after the soft
// device's checks) and completes it before returning, so a completion here
// means the bytes are placed (Caps.WriteCompletion is CompletionPlaced).
// Posting is still not completing: the completion is delivered through the
// CQ, and a SEND that finds no receive waits.
//
// RNR: a SEND or WRITE with immediate that finds no posted receive is
// retried as InfiniBand does after an RNR NAK: after the peer's
// min_rnr_timer, at most rnr_retry times (7 = forever), then it completes
// with RNR_RETRY_EXC_ERR. A receive posted meanwhile ends the wait at once.
// Later work on the QP waits behind it, in order.
//
// A request to a peer QP that cannot receive (RESET, INIT, ERR, destroyed)
// completes with RETRY_EXC_ERR at once: loopback knows no answer will come.
//
// Devices opened from one Network can reach each other: by name for the
// connection manager (Listen/Dial), or by device name (AddressVector.Addr,
// empty for the same device) and QPN for a QP connected by Modify.
package loopback

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// Network connects the loopback devices opened from it.
type Network struct {
	mu        sync.Mutex
	devices   map[string]*soft.Device
	listeners map[string]*listener
	endpoints map[*soft.QP]*endpoint
	next      int
}

// NewNetwork returns an empty loopback network.
func NewNetwork() *Network {
	return &Network{
		devices:   make(map[string]*soft.Device),
		listeners: make(map[string]*listener),
		endpoints: make(map[*soft.QP]*endpoint),
	}
}

// New returns a provider for a device on a network of its own: its QPs
// connect to each other.
func New() provider.Provider { return NewNetwork().Provider() }

// Provider returns a provider whose Open adds a device ("loopback0",
// "loopback1", ...) to the network.
func (n *Network) Provider() provider.Provider { return providerFunc(n.open) }

type providerFunc func() (provider.Device, error)

func (f providerFunc) Open() (provider.Device, error) { return f() }

func (n *Network) open() (provider.Device, error) {
	n.mu.Lock()
	name := "loopback" + strconv.Itoa(n.next)
	n.next++
	n.mu.Unlock()
	l := &link{net: n, name: name}
	d := soft.NewDevice(l, soft.Config{Name: name})
	n.mu.Lock()
	n.devices[name] = d
	n.mu.Unlock()
	return d, nil
}

// link is one device's attachment to the network.
type link struct {
	net  *Network
	name string
}

func (l *link) AdjustCaps(c *provider.Caps) {
	c.Transport = "loopback"
	c.AtomicScope = provider.AtomicDevice
	c.WriteCompletion = provider.CompletionPlaced
	c.Persistence = true
	c.ManualConnect = true
	c.RNRRetry = true
	c.MaxPrivateData = MaxPrivateData
	c.MaxInlineData = 4096
}

// MaxPrivateData is the longest private data loopback connections carry.
const MaxPrivateData = 1024

// Connect attaches qp to the QP named by attr.AV.Addr (a device name on the
// network; empty for qp's own device) and attr.DestQPN.
func (l *link) Connect(qp *soft.QP, attr *provider.QPAttr) (soft.Endpoint, error) {
	name := attr.AV.Addr
	if name == "" {
		name = l.name
	}
	l.net.mu.Lock()
	d, ok := l.net.devices[name]
	l.net.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: no loopback device %q", provider.ErrInvalidArgument, name)
	}
	peer, ok := d.QPByNumber(attr.DestQPN)
	if !ok {
		return nil, fmt.Errorf("%w: no QP %#x on %s", provider.ErrInvalidArgument, attr.DestQPN, name)
	}
	return l.net.newEndpoint(qp, peer), nil
}

// Close removes the device from the network and closes its listeners.
func (l *link) Close() error {
	n := l.net
	n.mu.Lock()
	delete(n.devices, l.name)
	var ls []*listener
	for _, ln := range n.listeners {
		if ln.dev.Link() == l {
			ls = append(ls, ln)
		}
	}
	n.mu.Unlock()
	for _, ln := range ls {
		ln.Close()
	}
	return nil
}

// endpointOf returns the endpoint attached to qp, if any.
func (n *Network) endpointOf(qp *soft.QP) *endpoint {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.endpoints[qp]
}

// checkPrivateData enforces the loopback private data limit.
func checkPrivateData(pd []byte) error {
	return cmkit.CheckPrivateData("loopback", pd, MaxPrivateData)
}
