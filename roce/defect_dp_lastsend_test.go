package roce_test

import (
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// TestLastSendAcknowledgedBeforeClose is the commonest shutdown: the client
// SENDs "done", the server polls the receive and closes its QP at once
// (issue 11 item 3: the client's SEND then completed with WR_FLUSH_ERR in
// 4 of 10 runs although the server had it). The responder acknowledges
// what it placed before it tells the peer the connection ends, and the
// requester takes what already arrived before it flushes. The SEND must
// complete successfully every time. GOVERBS_LASTSEND_TRIES sets the number
// of tries.
func TestLastSendAcknowledgedBeforeClose(t *testing.T) {
	tries := testkit.EnvInt("GOVERBS_LASTSEND_TRIES", 20)
	a := openDevice(t, roce.Options{})
	b := openDevice(t, roce.Options{})
	defer b.Close()
	defer a.Close()
	bad := 0
	for try := range tries {
		qa, qb, pda, pdb, cqa, cqb := connectPair(t, a, b)
		msg := mustMR(t, pda, 64, verbs.AccessLocalWrite)
		copy(msg.Bytes(), "done")
		recv := mustMR(t, pdb, 64, verbs.AccessLocalWrite)
		if err := qb.PostRecv([]verbs.RecvWR{{ID: 7, SGL: []verbs.SGE{recv.SGE(0, 64)}}}); err != nil {
			t.Fatal(err)
		}
		if err := qa.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{msg.SGE(0, 4)}}}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if wc, err := waitOne(ctx, cqb); err != nil || wc.Status != verbs.StatusSuccess || string(recv.Bytes()[:4]) != "done" {
			t.Fatalf("try %d: receive %+v %v", try, wc, err)
		}
		qb.Close() // at once, as a server that got its last message does
		wc, err := waitOne(ctx, cqa)
		cancel()
		if err != nil {
			t.Fatalf("try %d: no send completion: %v", try, err)
		}
		if wc.Status != verbs.StatusSuccess {
			bad++
			t.Errorf("try %d: delivered SEND completed with %v\nA %v", try, wc.Status, nonZero(qa.Counters()))
		}
		qa.Close()
	}
	t.Logf("%d tries, %d delivered SENDs reported failed", tries, bad)
}
