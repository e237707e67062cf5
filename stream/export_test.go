package stream

// IsClosed reports whether c is closed, for the external tests.
var IsClosed = isClosed

// Cut disconnects c's QP without the disconnect message, as a reset cuts a
// connection, for the external tests.
func Cut(c *Conn) error { return c.qp.Disconnect() }
