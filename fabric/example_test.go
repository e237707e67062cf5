//go:build cgo && libfabric

package fabric_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/fabric"
	"github.com/goverbs/goverbs/verbs"
)

// Example connects two QPs through libfabric's tcp provider on the loopback
// interface and WRITEs into the peer's memory.
func Example() {
	p, err := fabric.New("fabric:tcp")
	if err != nil {
		log.Fatal(err) // no tcp provider on this host
	}
	// Two devices, as two processes would have.
	server, err := verbs.Open(p)
	if err != nil {
		log.Fatal(err)
	}
	defer server.Close()
	client, err := verbs.Open(p)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	qpOf := func(d *verbs.Device) (*verbs.PD, *verbs.CQ, *verbs.QP) {
		pd, _ := d.AllocPD()
		cq, _ := d.CreateCQ(16)
		qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
			Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			log.Fatal(err)
		}
		return pd, cq, qp
	}
	spd, _, sqp := qpOf(server)
	cpd, ccq, cqp := qpOf(client)

	// The server exposes a region and accepts one connection.
	target, _ := spd.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	ln, err := server.Listen("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
		req, err := ln.Accept(ctx)
		if err == nil {
			req.Accept(ctx, sqp, verbs.ConnParam{})
		}
	}()

	// The client dials, then WRITEs. (A real peer would learn the
	// server's region from the connection's private data or a message:
	// target.Remote().MarshalBinary.)
	if _, err := client.Dial(ctx, ln.Addr(), cqp, verbs.ConnParam{}); err != nil {
		log.Fatal(err)
	}
	src, _ := cpd.RegisterMR([]byte("hello, fabric"), 0)
	err = cqp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{src.SGE(0, src.Len())}, Remote: target.Remote().At(0)}})
	if err != nil {
		log.Fatal(err)
	}
	wc := make([]verbs.WorkCompletion, 1)
	for {
		if n, err := ccq.Poll(wc); err != nil || n == 1 {
			break
		}
	}
	fmt.Println(wc[0].Status, client.Caps().WriteCompletion)
	fmt.Printf("%s\n", target.Bytes()[:src.Len()])
	// Output:
	// success placed (bytes visible in the target region)
	// hello, fabric
}
