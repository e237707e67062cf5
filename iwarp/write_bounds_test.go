package iwarp_test

import (
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/verbs"
)

// A WRITE that runs past the end of its grant fails with a remote access
// error, and iWARP places its segments before the one that crosses the
// end: DDP carries no message length (RFC 5041 §5; the kernel's siw does
// the same), so the data sink checks each tagged segment alone. What
// must hold is the grant: no byte outside the region changes, the bytes
// that did change are the WRITE's own, nothing of the crossing segment or
// after it lands, and the QP goes to ERR (docs/semantics-changes.md,
// item 14).
func TestWritePastGrantPlacesOnlyInside(t *testing.T) {
	p := newPair(t)
	const n = 64 << 10
	backing := make([]byte, n+4096) // the region, then a guard nobody granted
	tgt := must(p.pb.RegisterMR(backing[:n], verbs.AccessLocalWrite|verbs.AccessRemoteWrite))
	src := must(p.pa.RegisterMR(make([]byte, n), verbs.AccessLocalWrite))
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i*7 + 1)
	}
	const off = 8 // the WRITE's last 8 bytes fall outside the region
	err := p.qa.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{src.SGE(0, n)}, Remote: tgt.Remote().At(off)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if wc := testkit.PollOne(t, ctx, p.cqa); wc.Status != verbs.StatusRemAccessErr {
		t.Fatalf("WRITE past the grant: %v, want %v", wc.Status, verbs.StatusRemAccessErr)
	}
	waitState(t, p.qb, verbs.StateErr)
	for i, b := range backing[n:] {
		if b != 0 {
			t.Fatalf("byte %d past the region changed to %#x", i, b)
		}
	}
	placed := 0
	for i, b := range backing[:off] {
		if b != 0 {
			t.Fatalf("byte %d before the WRITE's address changed to %#x", i, b)
		}
	}
	for i := off; i < n; i++ {
		if backing[i] == 0 {
			continue
		}
		if want := src.Bytes()[i-off]; backing[i] != want {
			t.Fatalf("byte %d is %#x, not the WRITE's %#x", i, backing[i], want)
		}
		placed = i + 1 - off
	}
	// The crossing segment is refused whole: at least its first byte
	// inside the region is still zero.
	if placed >= n-off {
		t.Fatalf("every byte up to the region's end was placed: the crossing segment landed")
	}
	t.Logf("%d of the WRITE's %d in-grant bytes were placed before the refused segment", placed, n-off)
}
