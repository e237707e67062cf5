// Command remotebuf is a two-process RDMA program, the shape most RDMA
// applications take: a server registers a buffer that its peer may WRITE
// and READ and hands the buffer's descriptor over the connection's private
// data; the client WRITEs into it, READs it back, and SENDs "done" into a
// receive the server posted before it accepted. Nothing but the transport
// line differs between loopback, iWARP, RoCEv2 and shared memory.
//
//	remotebuf -transport iwarp -listen 127.0.0.1:0          # prints "listening on ADDR"
//	remotebuf -transport iwarp -connect ADDR
//
// loopback reaches only within its own process: -transport loopback runs
// both sides in one process, and so does -self with any transport.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/loopback"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// open opens a device of the named transport: the one line an application
// changes to move between transports.
func open(transport string) (*verbs.Device, error) {
	switch transport {
	case "loopback":
		return verbs.Open(loopback.New())
	case "iwarp":
		return verbs.Open(iwarp.New())
	case "roce":
		return verbs.Open(roce.New(roce.Options{Addr: "127.0.0.1:0"}))
	case "shm":
		return verbs.Open(shm.New())
	}
	return nil, fmt.Errorf("unknown transport %q (loopback, iwarp, roce, shm)", transport)
}

// defaultAddr is where a server listens when -listen is not given: the
// same on every transport (shm takes host:port as the name of a socket on
// this host; loopback as a name in its process).
const defaultAddr = "127.0.0.1:0"

const (
	bufSize = 4096
	payload = "written by the client with RDMA WRITE"
)

func main() {
	transport := flag.String("transport", "iwarp", "loopback, iwarp, roce or shm")
	listen := flag.String("listen", "", "serve at `ADDR` (default: a free address, printed)")
	connect := flag.String("connect", "", "connect to the server at `ADDR`")
	self := flag.Bool("self", false, "run the server and the client in this process")
	timeout := flag.Duration("timeout", 20*time.Second, "give up after this long")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("remotebuf: ")
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	dev, err := open(*transport)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	switch {
	case *connect != "":
		err = client(ctx, dev, *connect)
	case *self || *transport == "loopback":
		err = both(ctx, dev)
	default:
		addr := *listen
		if addr == "" {
			addr = defaultAddr
		}
		err = server(ctx, dev, addr, func(a string) { fmt.Printf("listening on %s\n", a) })
	}
	if err != nil {
		log.Fatal(err)
	}
}

// both runs the server and the client over one device.
func both(ctx context.Context, dev *verbs.Device) error {
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- server(ctx, dev, defaultAddr, func(a string) { ready <- a }) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		return err
	}
	return errors.Join(client(ctx, dev, addr), <-done)
}

// endpoint is a QP with its CQ.
type endpoint struct {
	pd *verbs.PD
	cq *verbs.CQ
	qp *verbs.QP
}

func newEndpoint(dev *verbs.Device) (*endpoint, error) {
	pd, err := dev.AllocPD()
	if err != nil {
		return nil, err
	}
	cq, err := dev.CreateCQ(16)
	if err != nil {
		return nil, err
	}
	// ForCM: the QP starts in INIT, so receives can be posted before the
	// connection is up, as with librdmacm's rdma_create_qp.
	qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, ForCM: true,
		Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return nil, err
	}
	return &endpoint{pd, cq, qp}, nil
}

// complete waits for one completion and checks its status.
func (e *endpoint) complete(ctx context.Context) (verbs.WorkCompletion, error) {
	wc := make([]verbs.WorkCompletion, 1)
	if _, err := e.cq.PollWait(ctx, wc); err != nil {
		return wc[0], err
	}
	return wc[0], wc[0].Err()
}

// server accepts one client, gives it the descriptor of a buffer it may
// WRITE and READ, and waits for its "done".
func server(ctx context.Context, dev *verbs.Device, addr string, listening func(string)) error {
	e, err := newEndpoint(dev)
	if err != nil {
		return err
	}
	buf, err := e.pd.RegisterMR(make([]byte, bufSize), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err != nil {
		return err
	}
	inbox, err := e.pd.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite)
	if err != nil {
		return err
	}
	if err := e.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{inbox.SGE(0, 64)}}}); err != nil {
		return err
	}
	ln, err := dev.Listen(addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	listening(ln.Addr())
	req, err := ln.Accept(ctx)
	if err != nil {
		return err
	}
	desc, _ := buf.Remote().MarshalBinary()
	if _, err := req.Accept(ctx, e.qp, verbs.ConnParam{PrivateData: desc}); err != nil {
		return err
	}
	wc, err := e.complete(ctx)
	if err != nil {
		return fmt.Errorf("waiting for the client's SEND: %w", err)
	}
	if got := string(inbox.Bytes()[:wc.ByteLen]); got != "done" {
		return fmt.Errorf("the client sent %q, not \"done\"", got)
	}
	// The client's "done" follows its WRITE on the same QP: the WRITE's
	// bytes are placed by the time its receive completes.
	if got := buf.Bytes()[:len(payload)]; !bytes.Equal(got, []byte(payload)) {
		return fmt.Errorf("the buffer holds %q, not the client's WRITE", got)
	}
	fmt.Printf("server: the client wrote %q and sent \"done\"\n", payload)
	return nil
}

// client connects, WRITEs into the server's buffer, READs it back and
// SENDs "done".
func client(ctx context.Context, dev *verbs.Device, addr string) error {
	e, err := newEndpoint(dev)
	if err != nil {
		return err
	}
	info, err := dev.Dial(ctx, addr, e.qp, verbs.ConnParam{})
	if err != nil {
		return err
	}
	defer e.qp.Disconnect()
	var remote verbs.RemoteBuf
	if err := remote.UnmarshalBinary(info.PrivateData); err != nil {
		return fmt.Errorf("the server's private data: %w", err)
	}
	local, err := e.pd.RegisterMR(make([]byte, bufSize), verbs.AccessLocalWrite)
	if err != nil {
		return err
	}
	n := len(payload)
	copy(local.Bytes(), payload)
	steps := []verbs.SendWR{
		{ID: 1, Opcode: verbs.OpWrite, SGL: []verbs.SGE{local.SGE(0, n)}, Remote: remote.At(0)},
		{ID: 2, Opcode: verbs.OpRead, SGL: []verbs.SGE{local.SGE(n, n)}, Remote: remote.At(0)},
	}
	for _, wr := range steps {
		wr.Flags = verbs.SendSignaled
		if err := e.qp.PostSend([]verbs.SendWR{wr}); err != nil {
			return err
		}
		if _, err := e.complete(ctx); err != nil {
			return fmt.Errorf("%v: %w", wr.Opcode, err)
		}
	}
	if got := local.Bytes()[n : 2*n]; !bytes.Equal(got, []byte(payload)) {
		return fmt.Errorf("READ returned %q, not what was written", got)
	}
	copy(local.Bytes()[2*n:], "done")
	if err := e.qp.PostSend([]verbs.SendWR{{ID: 3, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{local.SGE(2*n, 4)}}}); err != nil {
		return err
	}
	// The server exits as soon as it has the "done": its SEND must still
	// complete with success here.
	if _, err := e.complete(ctx); err != nil {
		return fmt.Errorf("SEND \"done\": %w", err)
	}
	fmt.Printf("client: wrote and read back %d bytes, sent \"done\"\n", n)
	return nil
}

func init() {
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: remotebuf [-transport T] [-listen ADDR | -connect ADDR | -self]\n")
		flag.PrintDefaults()
	}
}
