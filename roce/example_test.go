package roce_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// Two RoCEv2 devices on the loopback interface: the listener shares a
// buffer through the connection's private data, the dialer WRITEs into it
// and READs it back.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	open := func() (*verbs.Device, *verbs.PD, *verbs.CQ, *verbs.QP) {
		dev, err := verbs.Open(roce.New(roce.Options{Addr: "127.0.0.1:0"}))
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
	server, spd, _, sqp := open()
	defer server.Close()
	client, cpd, ccq, cqp := open()
	defer client.Close()

	// The server registers 64 bytes and offers them with its accept.
	shared, _ := spd.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	desc, _ := shared.Remote().MarshalBinary()
	ln, err := server.Listen("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	accepted := make(chan error, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err == nil {
			_, err = req.Accept(ctx, sqp, verbs.ConnParam{PrivateData: desc})
		}
		accepted <- err
	}()

	info, err := client.Dial(ctx, ln.Addr(), cqp, verbs.ConnParam{})
	if err != nil {
		log.Fatal(err)
	}
	// The server's Accept returns once the dialer's RTU arrives, which
	// may be after Dial returned; the devices close only after that.
	if err := <-accepted; err != nil {
		log.Fatal(err)
	}
	var remote verbs.RemoteBuf
	if err := remote.UnmarshalBinary(info.PrivateData); err != nil {
		log.Fatal(err)
	}

	local, _ := cpd.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite)
	copy(local.Bytes(), "hello, RoCE")
	err = cqp.PostSend([]verbs.SendWR{
		{ID: 1, Opcode: verbs.OpWrite, SGL: []verbs.SGE{local.SGE(0, 11)}, Remote: remote.At(0)},
		{ID: 2, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{local.SGE(32, 11)}, Remote: remote.At(0)},
	})
	if err != nil {
		log.Fatal(err)
	}
	wc := make([]verbs.WorkCompletion, 1)
	for n := 0; n == 0; n, _ = ccq.Poll(wc) {
		ccq.Wait(ctx)
	}
	fmt.Println(wc[0].Opcode, wc[0].Status)
	fmt.Printf("%s\n", local.Bytes()[32:43])
	// Output:
	// RDMA_READ success
	// hello, RoCE
}
