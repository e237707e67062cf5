package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// The control protocol: JSON objects, one per line, over a TCP connection
// between the two processes of a run (over a net.Pipe in one process, so
// that both placements run the same code). The client drives; the server
// answers. Per run:
//
//	client → hello{config}          server → hello{pid}
//	per test:
//	  → setup{params}                ← ready{listen addresses}
//	  (the client connects its QPs or sockets)
//	  → connected                    ← ok
//	  per size:
//	    → start{trial}               ← started
//	    ⇄ warm (each side once its initiators are warmed up)
//	    ← done{measurement}          (only when the server initiates)
//	    → stop                       ← stopped{cpu}
//	  → teardown                     ← ok
//	→ bye
//
// Either side may send error{text} at any time; the run then ends.
const protocolVersion = 1

// message is every control message; Op says which fields are set.
type message struct {
	Op      string       `json:"op"`
	Version int          `json:"version,omitempty"`
	Config  *Config      `json:"config,omitempty"`
	Params  *params      `json:"params,omitempty"`
	Addrs   []string     `json:"addrs,omitempty"`
	Trial   *trial       `json:"trial,omitempty"`
	Meas    *measurement `json:"meas,omitempty"`
	CPU     *cpuSpan     `json:"cpu,omitempty"`
	PID     int          `json:"pid,omitempty"`
	Session int64        `json:"session,omitempty"`
	Error   string       `json:"error,omitempty"`
}

// trial is one measurement: a test session at one message size.
type trial struct {
	Size     int64         `json:"size"`
	Iters    int           `json:"iters,omitempty"`
	Duration time.Duration `json:"duration,omitempty"`
	Warmup   Warmup        `json:"warmup"`
}

// cpuSpan is the CPU a process spent over a measurement.
type cpuSpan struct {
	User   time.Duration `json:"user"`
	System time.Duration `json:"system"`
	Wall   time.Duration `json:"wall"`
}

// RemoteError is an error the other process reported.
type RemoteError struct{ Msg string }

func (e *RemoteError) Error() string { return "bench: peer: " + e.Msg }

// ProtocolError is a control message that does not fit the protocol.
type ProtocolError struct {
	Want, Got string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("bench: control protocol: want %q, got %q", e.Want, e.Got)
}

// ctrl is one end of a control connection. A reader goroutine delivers
// messages to in, so a side can wait for a message and for its own workers
// at once, and two sides sending at the same moment never deadlock (a
// net.Pipe has no buffer).
type ctrl struct {
	conn net.Conn
	mu   sync.Mutex // serialises writes
	enc  *json.Encoder
	in   chan message
	err  error // why in was closed; read after in is closed

	// Owned by the one goroutine that coordinates this side.
	pending []message // received while waiting for something else
	closed  bool      // in was closed and its error reported
}

func newCtrl(conn net.Conn) *ctrl {
	c := &ctrl{conn: conn, enc: json.NewEncoder(conn), in: make(chan message, 8)}
	go c.read()
	return c
}

// maxControlLine bounds one control message: a shipped latency
// measurement of a long run is the largest.
const maxControlLine = 512 << 20

func (c *ctrl) read() {
	defer close(c.in)
	sc := bufio.NewScanner(c.conn)
	sc.Buffer(nil, maxControlLine)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			c.err = fmt.Errorf("bench: control message: %w", err)
			return
		}
		c.in <- m
	}
	c.err = sc.Err()
	if c.err == nil {
		c.err = errPeerGone
	}
}

// errPeerGone reports that the control connection closed.
var errPeerGone = errors.New("bench: the peer closed the control connection")

// send writes one message.
func (c *ctrl) send(m message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enc.Encode(&m); err != nil {
		return fmt.Errorf("bench: control: sending %s: %w", m.Op, err)
	}
	return nil
}

// fail tells the peer why this side gives up; errors sending are moot.
func (c *ctrl) fail(err error) {
	var re *RemoteError
	if !errors.As(err, &re) && !errors.Is(err, errPeerGone) {
		c.send(message{Op: "error", Error: err.Error()})
	}
}

// recv returns the next message; an error message becomes a *RemoteError.
func (c *ctrl) recv(ctx context.Context) (message, error) {
	if len(c.pending) > 0 {
		m := c.pending[0]
		c.pending = c.pending[1:]
		return c.check(m, true)
	}
	select {
	case m, ok := <-c.in:
		return c.check(m, ok)
	case <-ctx.Done():
		return message{}, ctx.Err()
	}
}

// check turns a received message into a message or an error.
func (c *ctrl) check(m message, ok bool) (message, error) {
	if !ok {
		c.closed = true
		return message{}, c.err
	}
	if m.Op == "error" {
		return message{}, &RemoteError{Msg: m.Error}
	}
	return m, nil
}

// expect returns the next message, which must be op.
func (c *ctrl) expect(ctx context.Context, op string) (message, error) {
	m, err := c.recv(ctx)
	if err == nil && m.Op != op {
		err = &ProtocolError{Want: op, Got: m.Op}
	}
	return m, err
}

func (c *ctrl) close() error { return c.conn.Close() }
