package talos

import (
	"context"
	"sync"
	"time"
)

// openingSlots paces how many sessions open at once: a session holds a slot from its first call until its
// machine's facts are read (or openingHold passes, so that slow machines do not hold the others back).
//
// Without it, thousands of sessions starting together (talos-ccm starting on a large cluster, or the end
// of a Talos API outage) each make their first call, then each their second, and so on: every machine's
// facts arrive at about the same time, seconds later, and nothing is written to Kubernetes until then.
// Paced, the first machines' facts arrive at once, and their Nodes are written while the others are read.
type openingSlots struct {
	slots chan struct{}
	hold  time.Duration
}

const (
	// openingConcurrency is how many sessions open at once: enough to keep the Talos API busy.
	openingConcurrency = 256
	// openingHold is the longest a session holds its slot.
	openingHold = time.Second
)

func newOpeningSlots(concurrency int, hold time.Duration) *openingSlots {
	return &openingSlots{slots: make(chan struct{}, concurrency), hold: hold}
}

// acquire waits for a slot; the returned function gives it back (at most once; it is also given back
// after the hold). A nil openingSlots does not pace.
func (o *openingSlots) acquire(ctx context.Context) (func(), error) {
	if o == nil {
		return func() {}, nil
	}

	select {
	case o.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	var once sync.Once

	release := func() { once.Do(func() { <-o.slots }) }
	timer := time.AfterFunc(o.hold, release)

	return func() {
		timer.Stop()
		release()
	}, nil
}
