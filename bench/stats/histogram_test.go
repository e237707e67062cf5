package stats

import (
	"math"
	"strings"
	"testing"
)

func TestBucketBounds(t *testing.T) {
	values := []int64{0, 1, 7, 8, 9, 15, 16, 17, 100, 1000, 1023, 1024, 123456789, math.MaxInt64}
	for v := int64(1); v < 1<<40; v = v*3 + 1 {
		values = append(values, v, v-1, v+1)
	}
	for _, v := range values {
		i := bucketOf(v)
		lo, hi := boundsOf(i)
		if i < 0 || i >= numBuckets || float64(v) < lo || float64(v) >= hi && v != math.MaxInt64 {
			t.Errorf("value %d in bucket %d [%v, %v)", v, i, lo, hi)
		}
		if v >= SubBuckets && (hi-lo)/lo > 1.0/SubBuckets {
			t.Errorf("bucket %d [%v, %v) wider than 1/%d", i, lo, hi, SubBuckets)
		}
	}
	for i := 1; i < numBuckets; i++ {
		_, prevHi := boundsOf(i - 1)
		if lo, _ := boundsOf(i); lo != prevHi {
			t.Fatalf("bucket %d starts at %v, previous ends at %v", i, lo, prevHi)
		}
	}
	if bucketOf(-5) != 0 {
		t.Errorf("negative sample not counted as 0")
	}
}

func TestHistogramBuckets(t *testing.T) {
	h := NewHistogram(RoundTrip)
	for _, v := range []int64{2000, 2000, 2100, 4000, 16000} {
		h.Add(v)
	}
	bs := h.Buckets()
	var total uint64
	for i, b := range bs {
		total += b.Count
		if i > 0 && b.Lo != bs[i-1].Hi {
			t.Errorf("bucket %d not contiguous: %v after %v", i, b, bs[i-1])
		}
	}
	if total != 5 || h.Total() != 5 {
		t.Errorf("counts sum to %d, Total %d, want 5", total, h.Total())
	}
	// RTT/2: 2000 ns round trip is 1 µs one way, in the first bucket.
	if first := bs[0]; first.Lo != 0.96 || first.Hi != 1.024 || first.Count != 2 {
		t.Errorf("first bucket %+v, want [0.96, 1.024) µs with 2 samples", first)
	}
	if last := bs[len(bs)-1]; last.Lo > 8 || last.Hi <= 8 || last.Count != 1 {
		t.Errorf("last bucket %+v, want the 8 µs sample", last)
	}
	if NewHistogram(OneWay).Buckets() != nil {
		t.Error("empty histogram has buckets")
	}
}

func TestHistogramRender(t *testing.T) {
	h := NewHistogram(OneWay)
	for range 30 {
		h.Add(1000)
	}
	for range 10 {
		h.Add(1200)
	}
	h.Add(5_000_000)
	for _, rows := range []int{1, 4, 12, 1000} {
		var sb strings.Builder
		if err := h.Render(&sb, rows, 20); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(sb.String(), "\n"), "\n")
		if len(lines) > rows {
			t.Errorf("maxRows %d: %d lines:\n%s", rows, len(lines), sb.String())
		}
		if !strings.Contains(sb.String(), strings.Repeat("#", 20)+"|") {
			t.Errorf("maxRows %d: no full bar for the peak:\n%s", rows, sb.String())
		}
	}
	var sb strings.Builder
	if err := h.Render(&sb, 1000, 10); err != nil {
		t.Fatal(err)
	}
	want := "   0.960 -     1.02 µs |##########|       30  73.2%\n"
	if !strings.HasPrefix(sb.String(), want) {
		t.Errorf("Render starts\n%q\nwant\n%q", sb.String()[:len(want)], want)
	}
	sb.Reset()
	if err := NewHistogram(OneWay).Render(&sb, 5, 5); err != nil || sb.String() != "(no samples)\n" {
		t.Errorf("empty Render = %q, %v", sb.String(), err)
	}
}

func TestHistogramAddDoesNotAllocate(t *testing.T) {
	h := NewHistogram(OneWay)
	if n := testing.AllocsPerRun(100, func() { h.Add(12345) }); n != 0 {
		t.Errorf("Add allocates %.1f times", n)
	}
}

func TestFormatMicros(t *testing.T) {
	for us, want := range map[float64]string{0.0625: "0.062", 1.25: "1.25", 12.5: "12.5", 125: "125", 1250.4: "1250"} {
		if got := FormatMicros(us); got != want {
			t.Errorf("FormatMicros(%v) = %q, want %q", us, got, want)
		}
	}
}
