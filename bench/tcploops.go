package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/goverbs/goverbs/bench/stats"
)

// ping writes message seq and reads the echo; validating, it checks the
// echo is the message.
func (c *tcpConn) ping() error {
	seq := c.seqTx
	if c.validate {
		c.r.fill(c.tx, seq)
	}
	if _, err := c.conn.Write(c.tx); err != nil {
		return err
	}
	c.seqTx++
	if _, err := io.ReadFull(c.conn, c.rx); err != nil {
		return err
	}
	c.seqRx++
	if c.validate {
		return c.check(c.rx, seq)
	}
	return nil
}

func (c *tcpConn) check(b []byte, seq uint64) error {
	err := c.r.check(b, seq)
	var ve *ValidationError
	if errors.As(err, &ve) {
		ve.Test, ve.Transport, ve.Conn = c.test, c.via, c.idx
	}
	return err
}

// tcpLatency is the active side of tcp-lat: ping-pong on each connection
// in turn, like the RDMA latency loop. At the end it half-closes every
// connection, which ends the peer's echo.
func tcpLatency(ctx context.Context, conns []*tcpConn, tr *trial, g *gate, pt *part) error {
	for _, c := range conns {
		defer closeOnCancel(ctx, c.conn)()
	}
	ops := func(sp span, rec *stats.Recorder) (int64, error) {
		t := stats.Mono()
		i := 0
		for ; sp.more(i, t); i++ {
			if err := conns[i%len(conns)].ping(); err != nil {
				return int64(i), cancelled(ctx, err)
			}
			if rec != nil {
				t = rec.RecordSince(t)
			} else if sp.until > 0 {
				t = stats.Mono()
			}
		}
		return int64(i), nil
	}
	t0 := stats.Mono()
	n, err := ops(warmSpan(tr).times(len(conns)), nil)
	if err != nil {
		return err
	}
	rec := stats.NewRecorder(capacity(tr, len(conns), n, time.Duration(stats.Mono()-t0)), stats.RoundTrip)
	pt.recs = []*stats.Recorder{rec}
	g.arrive()
	if err := g.wait(ctx); err != nil {
		return err
	}
	_, err = ops(g.measured(tr).times(len(conns)), rec)
	pt.end = stats.Mono()
	for _, c := range conns {
		err = errors.Join(err, halfClose(c.conn))
	}
	return err
}

// echo is the passive side of tcp-lat: it answers every message with the
// same bytes until the peer's FIN.
func (c *tcpConn) echo(ctx context.Context) error {
	defer closeOnCancel(ctx, c.conn)()
	for {
		if _, err := io.ReadFull(c.conn, c.rx); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return cancelled(ctx, err)
		}
		if c.validate {
			if err := c.check(c.rx, c.seqRx); err != nil {
				return err
			}
		}
		c.seqRx++
		if _, err := c.conn.Write(c.rx); err != nil {
			return cancelled(ctx, err)
		}
	}
}

// stream is the active side of tcp-bw on one connection: write messages
// through the warm-up, then the measurement, then half-close. With
// --bidir the peer streams back at the same time, which a second
// goroutine drains.
func (c *tcpConn) stream(ctx context.Context, tr *trial, g *gate, pt *part, bidir bool) error {
	defer closeOnCancel(ctx, c.conn)()
	sinkErr := make(chan error, 1)
	if bidir {
		go func() { sinkErr <- c.sink(ctx) }()
	}
	if _, err := c.write(warmSpan(tr)); err != nil {
		return cancelled(ctx, err)
	}
	g.arrive()
	if err := g.wait(ctx); err != nil {
		return err
	}
	n, err := c.write(g.measured(tr))
	pt.msgs, pt.end = n, stats.Mono()
	if err != nil {
		return cancelled(ctx, err)
	}
	if err := halfClose(c.conn); err != nil {
		return err
	}
	if bidir {
		return <-sinkErr
	}
	return nil
}

// write writes messages for the span and returns how many.
func (c *tcpConn) write(sp span) (int64, error) {
	var i int
	for t := stats.Mono(); sp.more(i, t); i++ {
		if c.validate {
			c.r.fill(c.tx, c.seqTx)
		}
		if _, err := c.conn.Write(c.tx); err != nil {
			return int64(i), err
		}
		c.seqTx++
		if sp.until > 0 {
			t = stats.Mono()
		}
	}
	return int64(i), nil
}

// sink reads a stream until the peer's FIN, checking every message when
// validating. A bandwidth stream ends with a whole message, so a partial
// one at the end is an error.
func (c *tcpConn) sink(ctx context.Context) error {
	defer closeOnCancel(ctx, c.conn)()
	if !c.validate {
		buf := make([]byte, max(c.size, 256<<10))
		_, err := io.CopyBuffer(io.Discard, readerOnly{c.conn}, buf)
		return cancelled(ctx, err)
	}
	for {
		_, err := io.ReadFull(c.conn, c.rx)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return cancelled(ctx, fmt.Errorf("bench: tcp stream: %w", err))
		}
		if err := c.check(c.rx, c.seqRx); err != nil {
			return err
		}
		c.seqRx++
	}
}

// readerOnly hides a connection's WriteTo, so io.CopyBuffer uses our
// buffer.
type readerOnly struct{ io.Reader }

// halfClose sends FIN: the peer reads EOF after the last message.
func halfClose(c net.Conn) error {
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		return tc.CloseWrite()
	}
	return nil
}
