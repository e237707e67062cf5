package mem

import "testing"

// BenchmarkAllocClose is the baseline for the registration benchmark: the
// cost of getting memory and giving it back, with and without first touch.
func BenchmarkAllocClose(b *testing.B) {
	sizes := []struct {
		name string
		n    int
	}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}, {"64MiB", 64 << 20}}
	for _, size := range sizes {
		for _, prefault := range []bool{false, true} {
			name, opts := size.name+"/lazy", []Option(nil)
			if prefault {
				name, opts = size.name+"/prefault", []Option{Prefault}
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(size.n))
				for b.Loop() {
					r, err := Alloc(size.n, opts...)
					if err != nil {
						b.Fatal(err)
					}
					if err := r.Close(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
