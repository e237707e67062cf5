package soft

// Signaled reports whether the WQE produces a completion on success: its WR
// asked for one, or the QP signals every WR (sq_sig_all). A link may use it
// to decide how soon the peer must acknowledge the WQE; RoCE requests an
// ACK at once only for WQEs someone waits for.
func (w *SendWQE) Signaled() bool { return w.e.Signaled }
