package verbs_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/loopback"
	"github.com/goverbs/goverbs/verbs"
)

// endpoint is one side of the examples: a QP with its CQ and PD.
type endpoint struct {
	pd *verbs.PD
	cq *verbs.CQ
	qp *verbs.QP
}

func newEndpoint(dev *verbs.Device) endpoint {
	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	cq, err := dev.CreateCQ(64)
	if err != nil {
		log.Fatal(err)
	}
	// ForCM: the QP starts in INIT, as rdma_create_qp makes it, so that
	// receives can be posted before the connection is up.
	qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, ForCM: true,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		log.Fatal(err)
	}
	return endpoint{pd, cq, qp}
}

// connectPair connects a client QP to a server QP through the connection
// manager. The server's answer carries acceptData as private data.
func connectPair(dev *verbs.Device, client, server endpoint, acceptData []byte) verbs.ConnInfo {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ln, err := dev.Listen("example")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
		req, err := ln.Accept(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := req.Accept(ctx, server.qp, verbs.ConnParam{PrivateData: acceptData}); err != nil {
			log.Fatal(err)
		}
	}()
	info, err := dev.Dial(ctx, "example", client.qp, verbs.ConnParam{})
	if err != nil {
		log.Fatal(err)
	}
	return info
}

// wait waits for one completion on cq and checks it succeeded.
func wait(cq *verbs.CQ) verbs.WorkCompletion {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wc := make([]verbs.WorkCompletion, 1)
	if _, err := cq.PollWait(ctx, wc); err != nil {
		log.Fatal(err)
	}
	if err := wc[0].Err(); err != nil {
		log.Fatal(err)
	}
	return wc[0]
}

func register(pd *verbs.PD, n int, access verbs.Access) *verbs.MR {
	mr, err := pd.RegisterMR(make([]byte, n), access)
	if err != nil {
		log.Fatal(err)
	}
	return mr
}

// A ping-pong: the client SENDs "ping" into a receive the server posted; the
// server answers "pong" the same way.
func Example() {
	dev, err := verbs.Open(loopback.New())
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	client, server := newEndpoint(dev), newEndpoint(dev)

	cbuf := register(client.pd, 16, verbs.AccessLocalWrite)
	sbuf := register(server.pd, 16, verbs.AccessLocalWrite)
	post := func(qp *verbs.QP, mr *verbs.MR, msg string) {
		copy(mr.Bytes(), msg)
		err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{mr.SGE(0, len(msg))}}})
		if err != nil {
			log.Fatal(err)
		}
	}
	recv := func(qp *verbs.QP, mr *verbs.MR) {
		if err := qp.PostRecv([]verbs.RecvWR{{SGL: []verbs.SGE{mr.SGE(8, 8)}}}); err != nil {
			log.Fatal(err)
		}
	}

	recv(server.qp, sbuf) // receives are posted before the connection is up
	recv(client.qp, cbuf)
	connectPair(dev, client, server, nil)
	post(client.qp, cbuf, "ping")
	wait(client.cq) // the SEND completed
	wc := wait(server.cq)
	fmt.Printf("server got %q\n", sbuf.Bytes()[8:8+wc.ByteLen])
	post(server.qp, sbuf, "pong")
	wait(server.cq)
	wc = wait(client.cq)
	fmt.Printf("client got %q\n", cbuf.Bytes()[8:8+wc.ByteLen])
	// Output:
	// server got "ping"
	// client got "pong"
}

// A one-sided READ: the server hands out a descriptor of its buffer (here in
// the connection's private data); the client reads it without the server's
// application doing anything.
func Example_read() {
	dev, err := verbs.Open(loopback.New())
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	client, server := newEndpoint(dev), newEndpoint(dev)

	table := register(server.pd, 64, verbs.AccessRemoteRead)
	copy(table.Bytes(), "the server's table, readable by its peers")
	desc, _ := table.Remote().MarshalBinary()
	info := connectPair(dev, client, server, desc)

	var remote verbs.RemoteBuf
	if err := remote.UnmarshalBinary(info.PrivateData); err != nil {
		log.Fatal(err)
	}
	dst := register(client.pd, 64, verbs.AccessLocalWrite)
	err = client.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{dst.SGE(0, 18)}, Remote: remote.At(0)}})
	if err != nil {
		log.Fatal(err)
	}
	wc := wait(client.cq)
	fmt.Printf("%v of %d bytes: %q\n", wc.Opcode, wc.ByteLen, dst.Bytes()[:18])
	// Output:
	// RDMA_READ of 18 bytes: "the server's table"
}

// The correct "payload, then flag" pattern: the producer WRITEs a batch of
// records, then a WRITE with immediate whose immediate value is the record
// count. The consumer reads the batch only after the immediate's receive
// completion, which on a reliable connection proves every earlier WRITE of
// the QP is placed. Polling the last byte of the batch instead would be a
// guess, not a protocol.
func Example_writeWithImmediate() {
	dev, err := verbs.Open(loopback.New())
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	producer, consumer := newEndpoint(dev), newEndpoint(dev)
	inbox := register(consumer.pd, 1024, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	desc, _ := inbox.Remote().MarshalBinary()
	info := connectPair(dev, producer, consumer, desc)
	var remote verbs.RemoteBuf
	if err := remote.UnmarshalBinary(info.PrivateData); err != nil {
		log.Fatal(err)
	}

	// The consumer posts a receive for the notification.
	if err := consumer.qp.PostRecv([]verbs.RecvWR{{ID: 1}}); err != nil {
		log.Fatal(err)
	}

	records := []string{"alpha", "bravo", "charlie"}
	out := register(producer.pd, 1024, verbs.AccessLocalWrite)
	wrs := make([]verbs.SendWR, 0, len(records)+1)
	for i, r := range records {
		copy(out.Bytes()[i*16:], r)
		wrs = append(wrs, verbs.SendWR{Opcode: verbs.OpWrite,
			SGL: []verbs.SGE{out.SGE(i*16, 16)}, Remote: remote.At(uint64(i * 16))})
	}
	wrs = append(wrs, verbs.SendWR{Opcode: verbs.OpWriteWithImm, Flags: verbs.SendSignaled,
		Imm: uint32(len(records)), Remote: remote.At(0)})
	if err := producer.qp.PostSend(wrs); err != nil {
		log.Fatal(err)
	}

	wc := wait(consumer.cq)
	fmt.Printf("notified: %v, %d records\n", wc.Opcode, wc.Imm)
	for i := range int(wc.Imm) {
		b := inbox.Bytes()[i*16 : i*16+16]
		fmt.Printf("record %d: %s\n", i, bytes.TrimRight(b, "\x00"))
	}
	// Output:
	// notified: RECV_RDMA_WITH_IMM, 3 records
	// record 0: alpha
	// record 1: bravo
	// record 2: charlie
}
