package roce

// Hooks for the cross-process test harness (only race builds do anything):
// its RPC messages order events between processes, which the race detector
// cannot see.
var (
	RaceAcquireSent = raceAcquireSent
	RaceReleaseAll  = raceReleaseAll
)
