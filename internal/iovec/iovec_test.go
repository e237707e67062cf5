package iovec

import (
	"bytes"
	"testing"
)

func TestAppendRange(t *testing.T) {
	segs := [][]byte{[]byte("abc"), {}, []byte("defg"), []byte("h")}
	for _, c := range []struct {
		off, n uint64
		want   []string
	}{
		{0, 8, []string{"abc", "defg", "h"}},
		{1, 4, []string{"bc", "de"}},
		{3, 4, []string{"defg"}},
		{7, 1, []string{"h"}},
		{2, 0, nil},
		{8, 0, nil},
	} {
		got := AppendRange(nil, segs, c.off, c.n)
		if len(got) != len(c.want) {
			t.Fatalf("AppendRange(off %d, n %d) = %q, want %q", c.off, c.n, got, c.want)
		}
		for i := range got {
			if !bytes.Equal(got[i], []byte(c.want[i])) {
				t.Fatalf("AppendRange(off %d, n %d) = %q, want %q", c.off, c.n, got, c.want)
			}
		}
	}
}
