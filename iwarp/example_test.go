package iwarp_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// Example connects two iWARP devices over TCP on 127.0.0.1 and WRITEs into
// the listener's memory; the remote buffer's address and rkey travel in
// the connection's private data.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The listening side: a region peers may write, described in the
	// private data of its accept.
	server, err := verbs.Open(iwarp.New())
	if err != nil {
		log.Fatal(err)
	}
	defer server.Close()
	spd, _ := server.AllocPD()
	target, _ := spd.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	scq, _ := server.CreateCQ(16)
	sqp, _ := spd.CreateQP(verbs.QPInitAttr{SendCQ: scq, RecvCQ: scq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	ln, err := server.Listen("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	desc, _ := target.Remote().MarshalBinary()
	accepted := make(chan error, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err == nil {
			_, err = req.Accept(ctx, sqp, verbs.ConnParam{PrivateData: desc})
		}
		accepted <- err
	}()

	// The dialing side: connect, learn the buffer, WRITE into it.
	client, err := verbs.Open(iwarp.New())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	pd, _ := client.AllocPD()
	src, _ := pd.RegisterMR([]byte("hello over iWARP"), 0)
	cq, _ := client.CreateCQ(16)
	qp, _ := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	info, err := client.Dial(ctx, ln.Addr(), qp, verbs.ConnParam{})
	if err != nil {
		log.Fatal(err)
	}
	if err := <-accepted; err != nil {
		log.Fatal(err)
	}
	var remote verbs.RemoteBuf
	if err := remote.UnmarshalBinary(info.PrivateData); err != nil {
		log.Fatal(err)
	}
	err = qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{src.SGE(0, src.Len())}, Remote: remote.At(0)}})
	if err != nil {
		log.Fatal(err)
	}
	wc := make([]verbs.WorkCompletion, 1)
	for n := 0; n == 0; {
		if err := cq.Wait(ctx); err != nil {
			log.Fatal(err)
		}
		n, _ = cq.Poll(wc)
	}
	// The completion proves placement (Caps.WriteCompletion): the bytes
	// are in the listener's region.
	fmt.Println(wc[0].Status, client.Caps().WriteCompletion == verbs.CompletionPlaced)
	fmt.Printf("%s\n", target.Bytes()[:16])
	qp.Close()
	sqp.Close()
	// Output:
	// success true
	// hello over iWARP
}
