package shm

// The poller drives the engine. An application that busy-polls a CQ waits
// for exactly what a connection's engine produces (receive completions,
// acknowledged SENDs): a Poll that finds the CQ empty runs one engine pass
// of every connection whose QP completes into the CQ, on the polling
// goroutine, and polls again (soft.PolledEngine: a connection registers
// with its QP's CQs while it runs). While pollers do so the engine
// goroutine parks (engineLoop), so a busy-polling process runs one
// spinning thread, not two: on a machine with as many CPUs as spinners
// (two processes on two CPUs) the message is served where it is awaited,
// with no goroutine hand-off and no second thread competing for the CPU.
// The engine's state belongs to whoever holds the connection's turn
// (conn.turn): the engine goroutine or one poller.

// driveCQs registers c with the CQs its QP completes into (at start) ...
// l.mu orders it against undrive: a connection detached first is not
// registered.
func (l *link) driveCQs(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.detached.Load() {
		return
	}
	c.undriveCQs = c.qp.DriveFromPolls(c)
}

// ... and takes it off them (at Detach, after detached is set).
func (c *conn) undrive() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.undriveCQs != nil {
		c.undriveCQs()
		c.undriveCQs = nil
	}
}

// DrivePoll implements soft.PolledEngine (drive).
func (c *conn) DrivePoll() bool { return c.drive() }

// StopPolling implements soft.PolledEngine (unpark): a goroutine that
// stops polling to wait hands the engine back its own goroutine first.
func (c *conn) StopPolling() { c.unpark() }

// drive runs one engine pass on the polling goroutine if nobody else has
// the turn, and asks the engine goroutine to park. It reports progress.
func (c *conn) drive() bool {
	if !c.polled.Load() {
		c.polled.Store(true)
	}
	if !c.turn.TryLock() {
		return false
	}
	defer c.turn.Unlock()
	if c.detached.Load() {
		return false
	}
	if c.kickEng.Load() {
		c.kickEng.Store(false)
	}
	if !c.eng.pass() {
		return false
	}
	c.cnt.polled.Add(1)
	return true
}

// unpark wakes the engine goroutine if it parked for a poller.
func (c *conn) unpark() {
	c.polled.Store(false)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}
