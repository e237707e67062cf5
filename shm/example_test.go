//go:build linux

package shm_test

import (
	"context"
	"fmt"
	"log"

	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// Two devices connect over a Unix socket; the dialer WRITEs into memory the
// listener registered with mem.Alloc, directly, and READs it back. In a
// real program the two sides are two processes; the protocol is the same.
func Example() {
	ctx := context.Background()
	open := func(name string) (*verbs.Device, *verbs.PD, *verbs.CQ, *verbs.QP) {
		dev, err := verbs.Open(shm.New(shm.Options{Name: name}))
		if err != nil {
			log.Fatal(err)
		}
		pd, _ := dev.AllocPD()
		cq, _ := dev.CreateCQ(16)
		qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
			Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			log.Fatal(err)
		}
		return dev, pd, cq, qp
	}
	server, spd, _, sqp := open("server")
	defer server.Close()
	client, cpd, ccq, cqp := open("client")
	defer client.Close()

	// The server's memory: memfd-backed, so the client can map it.
	region, _ := mem.Alloc(4096)
	defer region.Close()
	target, _ := spd.RegisterMemory(region, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	defer target.Deregister()
	desc, _ := target.Remote().MarshalBinary()

	ln, _ := server.Listen("")
	defer ln.Close()
	go func() {
		req, err := ln.Accept(ctx)
		if err == nil {
			req.Accept(ctx, sqp, verbs.ConnParam{PrivateData: desc})
		}
	}()
	info, err := client.Dial(ctx, ln.Addr(), cqp, verbs.ConnParam{})
	if err != nil {
		log.Fatal(err)
	}
	var remote verbs.RemoteBuf
	remote.UnmarshalBinary(info.PrivateData)

	buf, _ := cpd.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite)
	defer buf.Deregister()
	copy(buf.Bytes(), "written by the client")
	cqp.PostSend([]verbs.SendWR{
		{ID: 1, Opcode: verbs.OpWrite, SGL: []verbs.SGE{buf.SGE(0, 21)}, Remote: remote.At(0)},
		{ID: 2, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{buf.SGE(32, 21)}, Remote: remote.At(0)},
	})
	wc := make([]verbs.WorkCompletion, 1)
	for n, _ := ccq.Poll(wc); n == 0; n, _ = ccq.Poll(wc) {
	}
	fmt.Println(wc[0].Status, string(region.Bytes()[:21]), string(buf.Bytes()[32:53]))
	// Output: success written by the client written by the client
}
