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

// BenchmarkPingPong is a 64-byte ping-pong over each transport: one
// round trip per op (goverbs bench stream-lat reports it as RTT/2 beside
// Go TCP).
func BenchmarkPingPong(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			dev := openDevice(b, tr)
			c1, c2, stop := pipe(b, dev, tr)
			defer stop()
			go func() {
				buf := make([]byte, 64)
				for {
					if _, err := io.ReadFull(c2, buf); err != nil {
						return
					}
					if _, err := c2.Write(buf); err != nil {
						return
					}
				}
			}()
			buf := make([]byte, 64)
			for b.Loop() {
				if _, err := c1.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c1, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
