package report

import (
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "8": 8, "8B": 8, "8b": 8, " 64 ": 64, "4K": 4096, "4k": 4096, "4KiB": 4096, "4kib": 4096,
		"64 KiB": 64 << 10, "1M": 1 << 20, "1MiB": 1 << 20, "8m": 8 << 20, "2G": 2 << 30, "1GiB": 1 << 30,
		"8388608": 8 << 20, "8589934591G": 8589934591 << 30,
	} {
		if got, err := ParseSize(in); got != want || err != nil {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestParseSizeRejects(t *testing.T) {
	for in, msg := range map[string]string{
		"":                     "want a number",
		"K":                    "want a number",
		"-8":                   "want a number",
		"1.5K":                 "whole number",
		"8KB":                  "ambiguous",
		"1MB":                  "ambiguous",
		"1gb":                  "ambiguous",
		"8T":                   "unknown unit",
		"8 bytes":              "unknown unit",
		"0x10":                 "unknown unit",
		"8589934592G":          "too large",
		"99999999999999999999": "too large",
	} {
		_, err := ParseSize(in)
		var se *SyntaxError
		if !errors.As(err, &se) || se.What != "size" || !strings.Contains(se.Msg, msg) {
			t.Errorf("ParseSize(%q) error %v, want a size *SyntaxError with %q", in, err, msg)
		}
	}
	_, err := ParseSize("64KB")
	if want := `report: bad size "64KB": ambiguous unit "KB": sizes are binary, write 64K or 64KiB`; err == nil || err.Error() != want {
		t.Errorf("ParseSize(64KB) = %v, want %s", err, want)
	}
}

func TestAllSizes(t *testing.T) {
	sizes := AllSizes()
	if len(sizes) != 23 || sizes[0] != 2 || sizes[22] != 8<<20 {
		t.Fatalf("AllSizes() = %v", sizes)
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i] != 2*sizes[i-1] {
			t.Errorf("AllSizes()[%d] = %d, not twice %d", i, sizes[i], sizes[i-1])
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 8: "8 B", 1000: "1000 B", 1024: "1 KiB", 1536: "1536 B",
		64 << 10: "64 KiB", 1 << 20: "1 MiB", 8 << 20: "8 MiB", 3 << 30: "3 GiB", 1<<30 + 1<<20: "1025 MiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{8: "8", 1024: "1K", 8 << 20: "8M", 1536: "1536"} {
		if got := shortSize(n); got != want {
			t.Errorf("shortSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFlagValues(t *testing.T) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var sizes Sizes
	var ths Thresholds
	fs.Var(&sizes, "size", "")
	fs.Var(&ths, "threshold", "")
	err := fs.Parse([]string{"--size", "8,64K", "--size=1MiB", "--threshold", "p99<20us,bw>1GB/s", "--threshold=rate>1Mpps"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sizes, Sizes{8, 64 << 10, 1 << 20}) || sizes.String() != "8,64K,1M" {
		t.Errorf("sizes = %v (%s)", sizes, sizes.String())
	}
	if len(ths) != 3 || ths.String() != "p99<20us,bw>1GB/s,rate>1Mpps" {
		t.Errorf("thresholds = %v", ths.String())
	}
	fs.SetOutput(new(strings.Builder))
	fs.PrintDefaults() // calls String on zero values
	if (*Sizes)(nil).String() != "" || (*Thresholds)(nil).String() != "" {
		t.Error("String of a nil flag value")
	}
	for _, bad := range [][]string{{"--size", "8KB"}, {"--size", "8,"}, {"--threshold", "p99<20"}} {
		if err := fs.Parse(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestParseFactor(t *testing.T) {
	for in, want := range map[string]float64{"2": 2, "2x": 2, "1.5X": 1.5, "3×": 3, " 0.5 ": 0.5, "1e1": 10} {
		if got, err := ParseFactor(in); got != want || err != nil {
			t.Errorf("ParseFactor(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "0", "-2", "NaN", "Inf", "2xx", "two", "1e400"} {
		var se *SyntaxError
		if _, err := ParseFactor(in); !errors.As(err, &se) {
			t.Errorf("ParseFactor(%q) error %v, want *SyntaxError", in, err)
		}
	}
}
