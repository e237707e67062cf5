package verbs_test

import (
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/loopback"
	"github.com/goverbs/goverbs/verbs"
)

// A ForCM QP takes receives before Dial and Accept, as a QP that
// librdmacm's rdma_create_qp made, so that a SEND sent the moment the
// connection is up finds its receive; a plain QP still starts in RESET
// and refuses them.
func TestForCMQPTakesReceivesBeforeConnect(t *testing.T) {
	dev := testkit.Open(t, loopback.New())
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(16)
	cp := verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
	plain, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: cp})
	if err != nil {
		t.Fatal(err)
	}
	if st := plain.State(); st != verbs.StateReset {
		t.Fatalf("plain QP in %v, want RESET", st)
	}
	buf, _ := pd.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite)
	recv := []verbs.RecvWR{{ID: 7, SGL: []verbs.SGE{buf.SGE(0, 64)}}}
	if err := plain.PostRecv(recv); err == nil {
		t.Fatal("a RESET QP took a receive")
	}
	server, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: cp, ForCM: true})
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := server.Query(); a.State != verbs.StateInit || a.Access != verbs.AccessRemote {
		t.Fatalf("ForCM QP: %v with access %v, want INIT with %v", a.State, a.Access, verbs.AccessRemote)
	}
	if err := server.PostRecv(recv); err != nil {
		t.Fatalf("receive before Accept: %v", err)
	}
	client, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: cp, ForCM: true,
		RemoteAccess: verbs.AccessRemoteRead})
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := client.Query(); a.Access != verbs.AccessRemoteRead {
		t.Fatalf("RemoteAccess not applied: %v", a.Access)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	testkit.Connect(t, ctx, dev, dev, "cm", client, server)
	msg, _ := pd.RegisterMR([]byte("hello"), 0)
	if err := client.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{msg.SGE(0, 5)}}}); err != nil {
		t.Fatal(err)
	}
	wc := make([]verbs.WorkCompletion, 2)
	got := 0
	for got < 2 {
		n, err := cq.PollWait(ctx, wc[got:])
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	for _, c := range wc {
		if err := c.Err(); err != nil {
			t.Fatal(err)
		}
		if c.Opcode == verbs.WCRecv && (c.ID != 7 || string(buf.Bytes()[:c.ByteLen]) != "hello") {
			t.Errorf("receive %+v: %q", c, buf.Bytes()[:c.ByteLen])
		}
	}
}
