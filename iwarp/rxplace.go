package iwarp

import (
	"github.com/goverbs/goverbs/internal/iovec"
	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// Placement: moving a segment's payload into the memory it names, from the
// receive buffer or straight from the socket.

// scatter copies b into the pieces, in order.
func scatter(pieces [][]byte, b []byte) {
	for _, p := range pieces {
		b = b[adapterCopy(p, b):]
	}
}

// placeRange places a segment's n payload bytes at bytes [off, off+n) of
// the memory segs names, then, for an FPDU streamed from the socket, reads
// its trailer and checks the CRC.
func (e *endpoint) placeRange(segs [][]byte, off uint64, payload []byte, crc *iw.CRC32c, n int) error {
	pieces := iovec.AppendRange(e.rx.dst[:0], segs, off, uint64(n))
	err := e.placeSegs(pieces, payload, crc, n)
	clear(pieces)
	if err == nil && crc != nil {
		err = e.trailer(crc)
	}
	return err
}

// placeSegs puts the segment's payload into pieces of memory the engine
// owns (a receive WR's buffers, a READ's sink): from the buffer, or
// streamed from the socket with the CRC taken on the way.
func (e *endpoint) placeSegs(pieces [][]byte, payload []byte, crc *iw.CRC32c, n int) error {
	if crc == nil {
		scatter(pieces, payload)
		return nil
	}
	x := &e.rx
	done := 0
	if k := min(n, x.w-x.r); k > 0 {
		b := x.b[x.r : x.r+k]
		scatter(pieces, b)
		e.crcIf(crc, b)
		x.r += k
		done = k
	}
	for done < n {
		e.askNotice() // the read below may wait for the peer
		x.r, x.w = 0, 0
		x.room(x.ra)
		x.iov = iovec.AppendRange(x.iov[:0], pieces, uint64(done), uint64(n-done))
		x.iov = append(x.iov, x.b[:x.ra])
		k, err := e.raw.readv(x.iov, true)
		clear(x.iov)
		if err != nil {
			return err
		}
		got := min(k, n-done)
		x.adapt(k, n-done)
		if e.crc {
			for _, p := range iovec.AppendRange(x.iov[:0], pieces, uint64(done), uint64(got)) {
				crc.Write(p)
			}
			clear(x.iov)
		}
		done += got
		x.w = k - got
	}
	return nil
}

// adapt sizes the read-ahead of the next payload read from this one, which
// asked for want payload bytes and got k bytes in all. A read that filled
// its read-ahead too finds the socket backed up: reading further ahead
// then saves system calls (each of which, on TCP, may also send an ACK) at
// the price of a copy through the buffer. A read that ended short finds
// the receiver keeping up: the payload goes straight to its target again.
func (x *rxState) adapt(k, want int) {
	switch {
	case k >= want+x.ra:
		x.ra = min(2*x.ra, maxReadAhead)
	case k < want:
		x.ra = minReadAhead
	}
}

func (e *endpoint) crcIf(crc *iw.CRC32c, b []byte) {
	if e.crc {
		crc.Write(b)
	}
}

// placeWrite puts a tagged WRITE segment's n payload bytes at (stag, to)
// after soft's checks. Streaming, the region is held only while bytes move
// (never while the engine waits for the socket), so deregistration is
// never held up by a slow or stalled peer; after a wait the range is
// checked again, and a key revoked meanwhile ends the connection with the
// matching Terminate.
func (e *endpoint) placeWrite(stag uint32, to uint64, payload []byte, crc *iw.CRC32c, n int) error {
	if n == 0 {
		return nil
	}
	x := &e.rx
	done := 0
	for {
		tg, f := e.qp.Access(stag, to+uint64(done), uint64(n-done), provider.AccessRemoteWrite)
		if f != soft.FaultNone {
			return e.violation(newTermError(faultTerm(f, to, uint64(n)), "RDMA Write of %d bytes at %#x, STag %#x: %v", n, to, stag, f))
		}
		buf := tg.Buf
		if crc == nil {
			adapterCopy(buf, payload)
			tg.Release()
			return nil
		}
		if done == 0 {
			k := adapterCopy(buf, x.b[x.r:x.w])
			e.crcIf(crc, buf[:k])
			x.r += k
			done, buf = k, buf[k:]
		}
		for len(buf) > 0 {
			x.r, x.w = 0, 0
			x.room(x.ra)
			x.iov = append(x.iov[:0], buf, x.b[:x.ra])
			k, err := e.raw.readv(x.iov, false)
			clear(x.iov)
			if err == errWouldBlock {
				break
			}
			if err != nil {
				tg.Release()
				return err
			}
			got := min(k, len(buf))
			x.adapt(k, len(buf))
			e.crcIf(crc, buf[:got])
			buf, done, x.w = buf[got:], done+got, k-got
		}
		tg.Release()
		if done == n {
			return nil
		}
		e.askNotice()
		if err := e.raw.waitReadable(); err != nil {
			return err
		}
	}
}
