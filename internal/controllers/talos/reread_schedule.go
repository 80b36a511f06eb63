package talos

import "time"

// rereadSchedule says when a session reads its machine's PlatformMetadata again: addressSettle after the
// machine's address set changed, and within PlatformRefresh while its Node waits for a providerID. It holds
// a timer only while a read is due, so an idle machine has none. The timer wakes the session, which asks
// isDue.
type rereadSchedule struct {
	// timer wakes the session when the read is due; nil while none is.
	timer *time.Timer
	// at is when the read is due, zero while none is.
	at   time.Time
	wake func()
	// forAddresses is set while a read is due for a changed address set.
	forAddresses bool
}

func newRereadSchedule(wake func()) *rereadSchedule {
	return &rereadSchedule{wake: wake}
}

// isDue reports whether a read is due at now.
func (r *rereadSchedule) isDue(now time.Time) bool {
	return !r.at.IsZero() && !now.Before(r.at)
}

// within makes a read due within d; one due earlier stays.
func (r *rereadSchedule) within(d time.Duration) {
	if !r.at.IsZero() && time.Until(r.at) <= d {
		return
	}

	r.at = time.Now().Add(d)

	if r.timer == nil {
		r.timer = time.AfterFunc(d, r.wake)

		return
	}

	r.timer.Reset(d)
}

// addressesChanged makes a read due addressSettle from now, unless one is due earlier.
func (r *rereadSchedule) addressesChanged() {
	r.forAddresses = true
	r.within(addressSettle)
}

// cancelWaiting cancels the read due while the Node waited for its providerID, and keeps one due for a
// changed address set.
func (r *rereadSchedule) cancelWaiting() {
	if !r.forAddresses {
		r.stop()
	}
}

// fired records that the due read is being made: its timer fired, and is let go.
func (r *rereadSchedule) fired() {
	r.timer = nil
	r.at = time.Time{}
}

// stop cancels the due read.
func (r *rereadSchedule) stop() {
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}

	r.at = time.Time{}
}
