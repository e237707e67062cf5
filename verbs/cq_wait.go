package verbs

import (
	"context"
	"fmt"
)

// PollWait copies up to len(wc) completions into wc, oldest first, waiting
// until at least one is there or ctx ends. It is the loop every consumer of
// a CQ would otherwise write around Poll and Wait: it polls first, so a
// completion already queued costs no wait, and it does not allocate when a
// completion is ready.
//
// It returns n > 0 with a nil error, or 0 and ctx's error, or the
// completions kept before an overrun and then ErrCQOverrun, as Poll does;
// an empty wc is ErrInvalidArgument.
// An error status in a completion is not an error of PollWait: look at each
// wc[i].Status (or use wc[i].Err).
func (cq *CQ) PollWait(ctx context.Context, wc []WorkCompletion) (int, error) {
	if len(wc) == 0 {
		// Nothing can be returned: a caller looping on it would spin.
		return 0, fmt.Errorf("%w: PollWait needs room for a completion (len(wc) is 0)", ErrInvalidArgument)
	}
	for {
		n, err := cq.p.Poll(wc)
		if n > 0 || err != nil {
			return n, err
		}
		if err := cq.p.Wait(ctx, false); err != nil {
			// A completion may have arrived together with the overrun or
			// just before ctx ended: hand it over rather than drop it.
			if n, perr := cq.p.Poll(wc); n > 0 || perr != nil {
				return n, perr
			}
			return 0, err
		}
	}
}
