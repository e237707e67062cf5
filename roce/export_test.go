package roce

// Hooks for the cross-process test harness (only race builds do anything):
// its RPC messages order events between processes, which the race detector
// cannot see.
var (
	RaceAcquireSent = raceAcquireSent
	RaceReleaseAll  = raceReleaseAll
)

// RaceSync orders a cross-process conformance call with the datagrams on
// either side of it, for the race detector: what this process received
// before the call, and what it sends after. conformance.WithCallHook and
// HookPeer run it around every call.
func RaceSync() {
	raceAcquireSent()
	raceReleaseAll()
}

// TimerVisits is how many QPs the timers of the device p opened last have
// looked at (engine.timerVisits).
func TimerVisits(p *Provider) uint64 {
	l, err := p.opened()
	if err != nil {
		return 0
	}
	l.eng.mu.Lock()
	defer l.eng.mu.Unlock()
	return l.eng.timerVisits
}
