package roce

// OpError is an error of a socket or connection-manager operation, in the
// manner of net.OpError: errors.Is sees through it to the cause (a
// syscall.Errno, net.ErrClosed, provider.ErrTimeout, ...).
type OpError struct {
	Op   string // "listen", "dial", "accept", ...
	Addr string // the address involved
	Err  error
}

func (e *OpError) Error() string {
	s := "roce: " + e.Op
	if e.Addr != "" {
		s += " " + e.Addr
	}
	return s + ": " + e.Err.Error()
}

func (e *OpError) Unwrap() error { return e.Err }
