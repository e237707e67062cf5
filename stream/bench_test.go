package stream_test

import (
	"fmt"
	"io"
	"testing"
)

// BenchmarkBandwidth streams writes of each size one way over each
// transport, the reader reading 256 KiB at a time as goverbs bench's sink
// does: go test -bench Bandwidth ./stream/. (goverbs bench stream-bw sets
// these figures beside Go TCP and raw WRITE.)
func BenchmarkBandwidth(b *testing.B) {
	for _, tr := range transports {
		for _, size := range []int{64 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("%s/%dKiB", tr.name, size>>10), func(b *testing.B) {
				dev := openDevice(b, tr)
				c1, c2, stop := pipe(b, dev, tr)
				defer stop()
				done := make(chan error, 1)
				go func() {
					buf := make([]byte, 256<<10)
					for {
						if _, err := c2.Read(buf); err != nil {
							if err == io.EOF {
								err = nil
							}
							done <- err
							return
						}
					}
				}()
				buf := make([]byte, size)
				b.SetBytes(int64(size))
				b.ResetTimer()
				for b.Loop() {
					if _, err := c1.Write(buf); err != nil {
						b.Fatal(err)
					}
				}
				if err := c1.CloseWrite(); err != nil {
					b.Fatal(err)
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
