package loopback_test

import (
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/loopback"
	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/verbs"
)

// A receiver that destroys its QP and unmaps the memory its receives were
// posted in, while the peer keeps SENDing, must not have the peer's
// goroutine copy into that memory afterwards: loopback places a SEND on
// the sender's goroutine, and the receive it took was discarded under it
// (a segmentation fault in stream's nettest run, where a Conn's Close
// unmaps its rings). Destroying the QP waits for a placement under way.
func TestDestroyReceiverDuringSends(t *testing.T) {
	const size = 256 << 10
	for try := range 30 {
		dev := testkit.Open(t, loopback.New())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		pdA, pdB := testkit.Must(dev.AllocPD())(t), testkit.Must(dev.AllocPD())(t)
		cqA, cqB := testkit.Must(dev.CreateCQ(64))(t), testkit.Must(dev.CreateCQ(64))(t)
		cp := verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
		qa := testkit.Must(pdA.CreateQP(verbs.QPInitAttr{SendCQ: cqA, RecvCQ: cqA, Cap: cp}))(t)
		qb := testkit.Must(pdB.CreateQP(verbs.QPInitAttr{SendCQ: cqB, RecvCQ: cqB, Cap: cp}))(t)
		testkit.Connect(t, ctx, dev, dev, "destroy-during-send", qa, qb)
		src := testkit.Must(pdA.RegisterMR(make([]byte, size), 0))(t)
		region, err := mem.Alloc(16 * size)
		if err != nil {
			t.Fatal(err)
		}
		dst := testkit.Must(pdB.RegisterMemory(region, verbs.AccessLocalWrite))(t)
		for i := range 16 {
			if err := qb.PostRecv([]verbs.RecvWR{{ID: uint64(i), SGL: []verbs.SGE{dst.SGE(i*size, size)}}}); err != nil {
				t.Fatal(err)
			}
		}
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			wc := make([]verbs.WorkCompletion, 16)
			for range 16 {
				if qa.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, size)}}}) != nil {
					return
				}
				if n, err := cqA.PollWait(ctx, wc[:1]); err != nil || n == 1 && wc[0].Status != verbs.StatusSuccess {
					return // the receiver went away: a flush or an error, never a crash
				}
			}
		}()
		time.Sleep(time.Duration(try%5) * 50 * time.Microsecond)
		if err := qb.Close(); err != nil {
			t.Fatal(err)
		}
		if err := dst.Deregister(); err != nil {
			t.Fatalf("try %d: Deregister after the QP closed: %v", try, err)
		}
		if err := region.Close(); err != nil {
			t.Fatalf("try %d: %v", try, err)
		}
		<-sent
		cancel()
	}
}
