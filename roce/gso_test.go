package roce_test

import (
	"bytes"
	"testing"

	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// TestGSO moves 4 MiB with WRITE and READ with UDP segmentation offload on
// (where the kernel has it) and off, by option and by environment: the
// bytes are the same, and the device counters say which path ran.
func TestGSO(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts roce.Options
		env  string
		want bool
	}{
		{"on", roce.Options{}, "", true},
		{"option off", roce.Options{DisableGSO: true}, "", false},
		{"env off", roce.Options{}, "0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(roce.GSOEnv, tc.env)
			a, b := openDevice(t, tc.opts), openDevice(t, tc.opts)
			defer b.Close()
			defer a.Close()
			qa, _, pda, pdb, cqa, _ := connectPair(t, a, b)
			const n = 4 << 20
			src := mustMR(t, pda, n, verbs.AccessLocalWrite)
			for i := range src.Bytes() {
				src.Bytes()[i] = byte(i * 13)
			}
			back := mustMR(t, pda, n, verbs.AccessLocalWrite)
			dst := mustMR(t, pdb, n, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
			err := qa.PostSend([]verbs.SendWR{
				{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, n)}, Remote: dst.Remote().At(0)},
				{ID: 2, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{back.SGE(0, n)}, Remote: dst.Remote().At(0)},
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if wc := pollOne(t, cqa); wc.Status != verbs.StatusSuccess || wc.ID != uint64(i+1) {
					t.Fatalf("completion %+v", wc)
				}
			}
			if !bytes.Equal(dst.Bytes(), src.Bytes()) || !bytes.Equal(back.Bytes(), src.Bytes()) {
				t.Fatal("data differs")
			}
			ca, cb := counterMap(deviceCounters(t, a)), counterMap(deviceCounters(t, b))
			used := ca["tx_gso_datagrams"] > 0 && cb["rx_gro_datagrams"] > 0
			t.Logf("A tx_gso_datagrams %d, B rx_gro_datagrams %d", ca["tx_gso_datagrams"], cb["rx_gro_datagrams"])
			if used && !tc.want {
				t.Fatal("GSO used although turned off")
			}
			if !used && tc.want {
				t.Log("the kernel offers no UDP GSO/GRO here; the plain path ran")
			}
		})
	}
}
