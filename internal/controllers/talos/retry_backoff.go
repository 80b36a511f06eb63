package talos

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/talos-ccm/talos-ccm/internal/ctxwait"
)

// retryBackoff spaces the retries of one machine's worker: the step doubles from its floor up to its cap,
// never past it, and each wait is jittered to half to all of its step, so that the machines that failed
// together (an endpoint outage) do not retry together.
//
// Workers keep their own backoff instead of returning to pkg/task's restarts, whose backoff grows to a
// minute and never starts over: after a Talos API outage, the machines waiting must be read again within
// the cap of its end.
type retryBackoff struct {
	floor, limit, step time.Duration
}

func newRetryBackoff(floor, limit time.Duration) *retryBackoff {
	return &retryBackoff{floor: floor, limit: limit, step: floor}
}

// reset starts the backoff over from its floor.
func (b *retryBackoff) reset() {
	b.step = b.floor
}

// wait sleeps for the next step, and reports false when ctx ended first.
func (b *retryBackoff) wait(ctx context.Context) bool {
	d := jitter(b.step)
	b.step = min(b.step*2, b.limit)

	return ctxwait.Sleep(ctx, d)
}

// jitter returns half to all of d, at random.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}
